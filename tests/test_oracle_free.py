"""The oracle-free rule, proven: routing reads scores only, never rewards or labels."""
import ast
import random
import subprocess
import sys
from pathlib import Path

import torch

from tests.conftest import make_tiny_llama
from vgrout import adapter as ad
from vgrout.gate import Gate
from vgrout.rollout import pack
from vgrout.vact import haar_direction, pooled_activations, score

ROUTING_PATH = ["vgrout/vact.py", "vgrout/gate.py", "vgrout/adapter.py", "vgrout/logprob.py", "vgrout/arms.py"]
FORBIDDEN_MODULES = {"vgrout.grader", "vgrout.evaluate", "vgrout.aggregate", "vgrout.diagnostics"}
FORBIDDEN_NAMES = {"reward", "rewards", "hacked", "gt_pass", "flawed_pass", "label", "labels", "grade"}


def _route(rollouts, acts, direction):
    gate = Gate(policy="quantile", q_lo=0.25, q_hi=0.75, buffer_size=64, warmup=8, cut_rule="buffer")
    zones = []
    for start in range(0, len(rollouts), 8):  # steps of 8 rollouts
        sl = slice(start, start + 8)
        zones += gate.decide(score({m: a[sl] for m, a in acts.items()}, direction))
    return zones


def test_permuting_or_replacing_labels_changes_no_routing_decision():
    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 97, (5,), generator=g).tolist() for _ in range(32)]
    lengths = torch.randint(2, 9, (32,), generator=g).tolist()
    comps = [torch.randint(0, 97, (n,), generator=g).tolist() for n in lengths]
    seqs = pack(prompts, comps, pad_id=0)
    rng = random.Random(0)
    rollouts = [{"reward": rng.choice([0.0, 0.5, 3.5]), "hacked": rng.random() < 0.3,
                 "gt_pass": rng.random() < 0.2} for _ in range(32)]
    acts = pooled_activations(lora, seqs)
    direction = haar_direction(acts, seed=3)
    zones = _route(rollouts, acts, direction)
    assert set(zones) == {"keep", "absorb", "route"}

    permuted = [dict(r) for r in rollouts]
    labels = [(r["reward"], r["hacked"], r["gt_pass"]) for r in rollouts]
    rng.shuffle(labels)
    for r, (rew, hk, gt) in zip(permuted, labels):
        r.update(reward=rew, hacked=hk, gt_pass=gt)
    replaced = [{"reward": -1.0, "hacked": not r["hacked"], "gt_pass": True} for r in rollouts]
    assert _route(permuted, acts, direction) == zones
    assert _route(replaced, acts, direction) == zones
    # the score does move routing, so the test could fail: a different direction differs
    assert _route(rollouts, acts, haar_direction(acts, seed=4)) != zones


def test_routing_path_modules_never_import_grader_or_read_labels():
    root = Path(__file__).resolve().parents[1]
    for rel in ROUTING_PATH:
        tree = ast.parse((root / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module not in FORBIDDEN_MODULES, f"{rel} imports {node.module}"
                names = {f"{node.module}.{a.name}" for a in node.names}
                assert not names & FORBIDDEN_MODULES, f"{rel} imports {names & FORBIDDEN_MODULES}"
            if isinstance(node, ast.Import):
                for a in node.names:
                    assert a.name not in FORBIDDEN_MODULES, f"{rel} imports {a.name}"
            if isinstance(node, ast.Name):
                assert node.id not in FORBIDDEN_NAMES, f"{rel}:{node.lineno} uses name {node.id}"
            if isinstance(node, ast.Attribute):
                assert node.attr not in FORBIDDEN_NAMES, f"{rel}:{node.lineno} reads .{node.attr}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in FORBIDDEN_NAMES, f"{rel}:{node.lineno} reads key '{node.value}'"
    # transitively too: importing the routing path loads no grader
    code = ("import sys, vgrout.vact, vgrout.gate, vgrout.adapter; "
            f"bad = {sorted(FORBIDDEN_MODULES)!r}; "
            "print([m for m in bad if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "[]", out.stdout
