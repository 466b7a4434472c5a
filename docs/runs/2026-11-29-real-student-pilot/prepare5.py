"""Round 5's workspace (README "Round 5"), built on the CPU before the device calls, as round 4's
(prepare4.py): the commit's tree with round 1's built inputs, params rendered by `vgrout preset
decisive` (the decisive grid's settings: the 1.5B at lr 1e-4, teacher-seeded, gate.cut_rule step,
arms none, routeV, uniform; test_medhard, 4 samples, curve 1) with these edits only:
  train.seeds [1, 2]   pilot seeds: the decisive seeds (100-105) stay unused
  train.ckpt_every 5   a run a call's limit stops loses at most 4 steps
  wsD5  runs none-1, routeV-1, uniform-1 (one batch of the decisive grid, its cost and routeV's per-row
        probe gradients on the 1.5B) and none-2 (a fourth packed run: the pool regime's third seed).
Env: REPO (the checkout), WORK (a scratch folder), MIX0_WS and POOL_WS (round 1's workspaces).
  python prepare5.py"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from workspaces import P2, ws  # noqa: E402

ws("wsD5", P2, "decisive", {"train.seeds": [1, 2], "train.ckpt_every": 5}, round_="5")
