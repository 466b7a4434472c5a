"""Round 4's workspaces (README "Round 4"), built on the CPU before the device calls, as round 3's
(prepare3.py): the commit's tree (git archive HEAD) with round 1's built inputs (substrate, pool,
pairs), params rendered by `vgrout preset` with the edits below, each packed as a tar. The student
is the 1.5B (item 5c's band: easy solve 9.9%), both regimes at one learning rate (1e-4, the rate
at which the 0.5B's mix-0 runs did not collapse).
  wsE4  mix 0 on the 48 easy training problems (round 2's split, easy_split.json), tested on the 20
        held-out easy ones: round 3's wsE3L with the 1.5B.
  wsP4  `vgrout preset real` with the 1.5B at lr 1e-4 (the teacher-seeded regime; its test split is
        test_medhard), eval 4 samples a test problem, 1 at each checkpoint.
  Both: checkpoints every 5 steps (a run a call's limit stops resumes from its last).
Env: REPO (the checkout), WORK (a scratch folder), MIX0_WS and POOL_WS (round 1's workspaces).
  python prepare4.py"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from workspaces import P1, P2, easy_train, heldout, ws  # noqa: E402

# checkpoints every 5 steps: a run the call's limit stops loses at most 4 steps (its resume starts there)
q15 = {"model.spec": "qwen2.5-coder-1.5b", "train.lr": 1e-4, "train.ckpt_every": 5}
common = {**q15, "train.steps": 30, "eval.n_samples": 8, "eval.curve_n_samples": 4}
ws("wsE4", P1, "pilot", {**common, "substrate.difficulties": ["easy"]}, easy_train, heldout, round_="4")
ws("wsP4", P2, "real", {**q15, "eval.n_samples": 4, "eval.curve_n_samples": 1}, round_="4")
