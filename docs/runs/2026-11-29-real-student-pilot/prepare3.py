"""Round 3's workspaces (README "Round 3"), built on the CPU before the device calls, as round 2's
(prepare2.py): the commit's tree (git archive HEAD) with round 1's built inputs (substrate, pool,
pairs), params rendered by `vgrout preset` with the edits below, each packed as a tar.
  wsA3  round 1's mix-0 workspace, 2 steps: its step-1 NaN replayed under the cuDNN switch.
  wsE3  mix 0 on the 48 easy training problems (round 2's split, easy_split.json), lr 3e-4: round 2's
        wsE unchanged but for the code (the NaN and the collapse came at this rate).
  wsE3L the same at lr 1e-4.
  wsP3  `vgrout preset real` unchanged (the teacher-seeded regime; its test split is test_medhard),
        checkpoints every 10 steps, eval 4 samples a test problem (the decisive design's 119 x 4), 1 at each checkpoint.
Env: REPO (the checkout), WORK (a scratch folder), MIX0_WS and POOL_WS (round 1's workspaces).
  python prepare3.py"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from workspaces import P1, P2, easy_train, heldout, ws  # noqa: E402

common = {"train.steps": 30, "train.ckpt_every": 10, "eval.n_samples": 8, "eval.curve_n_samples": 4}
ws("wsA3", P1, "pilot", {"train.steps": 2, "train.ckpt_every": 1})
ws("wsE3", P1, "pilot", {**common, "substrate.difficulties": ["easy"]}, easy_train, heldout)
ws("wsE3L", P1, "pilot", {**common, "substrate.difficulties": ["easy"], "train.lr": 1e-4}, easy_train, heldout)
ws("wsP3", P2, "real", {"eval.n_samples": 4, "eval.curve_n_samples": 1})
