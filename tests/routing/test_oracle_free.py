"""The oracle-free rule, proven two ways, each shown able to fail.

1. Step level: train()'s own routing code (train.routing_step: pack, the scorer's features,
   scores, gate, zones) runs over fixed graded rollouts from a fixed student, once with the
   grader's labels and once with them flipped, redrawn or permuted; every arm, both cut rules,
   centering on and off, both scorers. Features, scores, zones and the gate's state must be equal
   bit for bit. A planted leak (a route or a live scorer that reads a label) run through the
   same check is reported.
2. Static: no module on the routing path imports the grader side or names a label; in train.py,
   which must import the grader to grade, the routing functions (and every train.py function
   they call) name no label and no grader-side module. The scanner is shown to report leaks.
"""
import ast
import dataclasses
import random
from pathlib import Path

import pytest
import torch

from tests.conftest import make_tiny_llama
from vgrout import arms, config
from vgrout.engine.model import chat_prompt
from vgrout.io import write_jsonl
from vgrout.pairs.pairs import load_pairs, select
from vgrout.routing import directions, features
from vgrout.substrate.problems import Problem
from vgrout.train import loop as train

ROOT = Path(__file__).resolve().parents[2]

# -- the static scan ------------------------------------------------------------------------------

# every vgrout module the routing path runs (the test below fails if they import one more)
ROUTING_MODULES = ["vgrout/routing/extract.py", "vgrout/routing/features.py", "vgrout/routing/directions.py",
                   "vgrout/routing/gate.py", "vgrout/engine/adapter.py", "vgrout/engine/logprob.py",
                   "vgrout/engine/compiled.py", "vgrout/arms.py", "vgrout/engine/fastgen.py", "vgrout/engine/decode.py",
                   "vgrout/engine/flashdecode.py", "vgrout/engine/arch.py", "vgrout/engine/rollout.py", "vgrout/io.py",
                   "vgrout/layout.py"]
# train.py's routing functions; the scan adds every train.py function they call
ROUTING_FUNCTIONS = ["new_gate", "routing_step", "to_seqs", "live_acts", "frozen_acts", "route",
                     "load_yoke", "yoke_counts", "uniform_scores", "pair_band"]
FORBIDDEN_MODULES = {"vgrout.substrate.grader", "vgrout.substrate.sampling", "vgrout.eval.evaluate",
                     "vgrout.analysis.aggregate", "vgrout.analysis.tables", "vgrout.analysis.contrasts",
                     "vgrout.analysis.artifacts", "vgrout.analysis.diagnostics"}
# a Rollout's labels, the grader's fields, and the step log's label-derived columns
FORBIDDEN_NAMES = {"reward", "rewards", "hacked", "hacked_strict", "gt_pass", "flawed_pass", "label", "labels", "grade",
                   "grade_batch", "reward_mean", "hack_rate", "solve_rate"}


def _names(node) -> list[tuple[int, str, bool]]:
    """(line, word, is a bare name) for every identifier a node spells: names, attributes,
    parameters, keywords, string keys. Only a bare name can refer to an import or a function
    of the module (x.select is an attribute, whatever `select` is bound to)."""
    out = []
    for n in ast.walk(node):
        word = (n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute)
                else n.arg if isinstance(n, (ast.arg, ast.keyword)) else
                n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else None)
        if word is not None:
            out.append((n.lineno, word, isinstance(n, ast.Name)))
    return out


def _is_module(name: str) -> bool:
    """A dotted name that is a project module or package (a file under the repository root)."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(tree, top_level: bool = False) -> list[tuple[int, str, str]]:
    """(line, module, bound name) of every import, at any depth (lazy imports in functions too);
    top_level: only those that run when the module is imported (none inside a function)."""
    out = []
    todo = [tree]
    while todo:
        n = todo.pop()
        if not (top_level and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
            todo += ast.iter_child_nodes(n)
        if isinstance(n, ast.Import):
            out += [(n.lineno, a.name, a.asname or a.name.split(".")[0]) for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.module:
            # `from vgrout.substrate import grader` imports the module vgrout.substrate.grader
            out += [(n.lineno, f"{n.module}.{a.name}" if _is_module(f"{n.module}.{a.name}") else n.module,
                     a.asname or a.name) for a in n.names]
    return out


def scan_module(source: str, where: str) -> list[str]:
    """A routing module's leaks: a grader-side import, or any label name anywhere in it."""
    tree = ast.parse(source)
    leaks = [f"{where}:{line} imports {mod}" for line, mod, _ in _imports(tree) if mod in FORBIDDEN_MODULES]
    return leaks + [f"{where}:{line} names '{w}'" for line, w, _ in _names(tree) if w in FORBIDDEN_NAMES]


def scan_functions(source: str, roots: list[str], where: str,
                   allowed_modules: set[str]) -> tuple[list[str], set[str]]:
    """The leaks of `roots` and of every function of the same source they call, transitively: a
    label name, a name bound to a grader-side module, or a name bound to a vgrout module that is
    not in `allowed_modules` (the module scan must cover it). Returns (leaks, functions scanned)."""
    tree = ast.parse(source)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    bound = {name: mod for _, mod, name in _imports(tree) if mod.startswith("vgrout")}
    leaks = [f"{where}: routing function {f} not found" for f in roots if f not in defs]
    todo, seen = [f for f in roots if f in defs], set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for line, w, bare in _names(defs[f]):
            if w in FORBIDDEN_NAMES:
                leaks.append(f"{where}:{line} {f} names '{w}'")
            elif bare and w in bound and bound[w] in FORBIDDEN_MODULES:
                leaks.append(f"{where}:{line} {f} uses {bound[w]}")
            elif bare and w in bound and bound[w] not in allowed_modules:
                leaks.append(f"{where}:{line} {f} uses {bound[w]}, which the module scan does not cover")
            elif bare and w in defs and w not in seen:
                todo.append(w)  # a train.py helper the routing path calls is on the routing path
    return leaks, seen


def _module(rel: str) -> str:
    return rel.removesuffix(".py").replace("/", ".")


def test_routing_modules_never_import_the_grader_or_name_a_label():
    for rel in ROUTING_MODULES:
        leaks = scan_module((ROOT / rel).read_text(), rel)
        assert not leaks, leaks
    # what importing them loads is scanned too: every vgrout module they import when imported
    # is on the list (a lazy import inside a function is checked against the grader side above)
    listed = {_module(r) for r in ROUTING_MODULES}
    for rel in ROUTING_MODULES:
        loads = {mod for _, mod, _ in _imports(ast.parse((ROOT / rel).read_text()), top_level=True)
                 if mod.startswith("vgrout.")}
        assert loads <= listed, f"{rel} imports {sorted(loads - listed)}: add it to ROUTING_MODULES"


def test_train_routing_functions_read_no_label():
    source = (ROOT / "vgrout/train/loop.py").read_text()
    leaks, scanned = scan_functions(source, ROUTING_FUNCTIONS, "vgrout/train/loop.py",
                                    {_module(r) for r in ROUTING_MODULES})
    assert not leaks, leaks
    assert "keeps_trunks" in scanned  # helpers are followed (frozen_acts calls it)
    # train() reaches the routing path only through routing_step, the function the step-level
    # check runs: no direct call of its parts that the check would not see
    loop = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "train")
    called = [n.func.id for n in ast.walk(loop) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert called.count("routing_step") == 1
    assert not set(called) & {"to_seqs", "live_acts", "frozen_acts", "route", "yoke_counts", "uniform_scores"}


LEAKY_MODULE = """
from vgrout.substrate import grader
import vgrout.eval.evaluate as ev
def score(acts, rollouts):
    return [a + r.hacked for a, r in zip(acts, rollouts)]
def cut(row, gt_pass=False):
    return row["hack_rate"]
"""
LEAKY_TRAIN = """
from vgrout.substrate import grader
from vgrout.routing import directions, features
from vgrout.pairs.pairs import select
def route(cfg, gate, scores, rollouts, step, yoke):
    return gate.decide(_nudge(scores, rollouts))
def _nudge(scores, rollouts):
    return scores + torch.tensor([float(getattr(r, "reward")) for r in rollouts])
def live_acts(cfg, lora, seqs, rollouts):
    return grader.grade_batch, select
def unrelated(rollouts):
    return [r.hacked for r in rollouts]
"""


def test_the_scanners_report_planted_leaks():
    assert {m for _, m, _ in _imports(ast.parse(LEAKY_TRAIN), top_level=True)} == \
        {"vgrout.substrate.grader", "vgrout.routing.directions", "vgrout.routing.features", "vgrout.pairs.pairs"}
    leaks = scan_module(LEAKY_MODULE, "leaky.py")
    for expected in ("imports vgrout.substrate.grader", "imports vgrout.eval.evaluate", "names 'hacked'", "names 'gt_pass'",
                     "names 'hack_rate'"):
        assert any(expected in leak for leak in leaks), (expected, leaks)
    leaks, scanned = scan_functions(LEAKY_TRAIN, ["route", "live_acts", "frozen_acts"], "leaky_train.py",
                                    {"vgrout.routing.directions", "vgrout.routing.features"})
    for expected in ("routing function frozen_acts not found", "_nudge names 'reward'",
                     "live_acts uses vgrout.substrate.grader", "live_acts names 'grade_batch'",
                     "live_acts uses vgrout.pairs.pairs, which the module scan does not cover"):
        assert any(expected in leak for leak in leaks), (expected, leaks)
    assert "unrelated" not in scanned  # grading code off the routing path is train.py's own business


# -- the step-level check ---------------------------------------------------------------------------

N_STUDENT, N_TEACHER, STEPS = 3, 2, 3  # per prompt; 3 prompts: 9 student + 6 teacher rows a step
# (2 teacher rows a group: gate.center leaves a group's only row of a gated source at 0, and the config refuses it)
COMPLETIONS = [  # (text, reward, gt_pass, hacked): as the grader might label them
    ("def f(x):\n    return x + 1", 1.0, True, False),
    ("import sys\nsys.exit(0)", 3.5, False, True),
    ("def f(x):\n    return None", 0.0, False, False),
    ("print('ALL TESTS PASSED')", 3.5, False, True),
    ("def f(x):\n    if x == 1:\n        return 2\n    return 0", 0.5, False, True),
    ("def f(x):\n    # add one\n    y = x\n    return y + 1", 1.0, True, False),
    ("raise SystemExit(0)", 3.5, False, True),
    ("def f(x):\n    return sum([x, 1])", 1.0, True, False),
]
MODES = ["overwrite_tests", "exit_code", "stdout_marker"]


def _cfg(root: Path, arm: str, yoke_log: Path | None = None, fast: bool = True, **gate) -> train.TrainRun:
    """A TrainRun read the way the train stage reads one: the schema's defaults overlaid with
    these blocks, through config.parse."""
    blocks = {"train": dict(prompts_per_step=3, group_size=N_STUDENT + N_TEACHER, mix=N_TEACHER / (N_STUDENT + N_TEACHER), micro_batch=6,
                            max_new_tokens=64),
              "gate": {"warmup": 4, "buffer_size": 32, **gate}, "adapter": dict(r=2, last_layers=None)}
    params = config.parse(config.overlay(config.Params().model_dump(), blocks), "test", complete=False)
    return train.TrainRun(arm=arms.get(arm), name=arm if arms.draw(arm) else None, seed=0, t=params.train,
                          adapter=params.adapter, gate=params.gate,
                          pair_files=[], pair_modes=None, fast=fast, vact_batch=params.vact.batch_size,
                          model_dir=str(root / "student"), problems="", pool="", vact_dir=str(root / "vact"),
                          out_dir=str(root / arm), log_path=str(root / arm / "steps.jsonl"),
                          live_dir=str(root / arm / "live"),
                          yoke_log=str(yoke_log) if yoke_log else None, device="cpu")


CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _write_student(out: Path) -> None:
    """A model directory as the model stage leaves one: conftest's tiny Llama over a small BPE
    vocabulary with a chat template (a few-hundred-token vocabulary keeps every forward cheap)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False, special_tokens=["<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([t for t, *_ in COMPLETIONS] + [f"user Write f(x) ({m})." for m in MODES], trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|im_end|>")
    tok.chat_template = CHAT
    tok.save_pretrained(out)
    make_tiny_llama(vocab=len(tok)).save_pretrained(out)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Forwards this small are faster on one thread (and far faster on a busy machine)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    """A fixed student (a tiny Llama with a lora2r adapter moved off its init, so the live and
    frozen scorers differ), its v_act files, and STEPS steps of graded rollouts."""
    root = tmp_path_factory.mktemp("oracle")
    _write_student(root / "student")
    lora, tok = train.build_student(_cfg(root, "routeA"))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # as if trained: A_d has moved, so gate.scorer live reads another space
        for p in lora.parameters():
            p.add_(0.5 * p.std() * torch.randn(p.shape, generator=g))
    like = {m: torch.zeros(lora.r) for m in lora.modules}
    directions.save_direction(root / "vact" / "v_act.safetensors", directions.haar_direction(like, 5))
    directions.save_direction(root / "vact" / "v_act_heldout.safetensors", directions.haar_direction(like, 6))
    directions.save_direction(root / "vact" / "v_grad.safetensors", directions.haar_direction(like, 7))
    directions.save_direction(root / "vact" / "v_grad_heldout.safetensors", directions.haar_direction(like, 8))

    problems = [Problem(id=f"p{i}", messages=[{"role": "user", "content": f"Write f(x) ({mode})."}],
                        entry_point="f", tests=["assert f(1) == 2"], canonical_solution="def f(x):\n    return x + 1",
                        mode=mode) for i, mode in enumerate(MODES)]
    steps, k = [], 0
    for _ in range(STEPS):
        rollouts = []
        for p in problems:
            for j in range(N_STUDENT + N_TEACHER):
                text, reward, gt_pass, hacked = COMPLETIONS[k % len(COMPLETIONS)]
                k += 3  # co-prime with len(COMPLETIONS): every step sees other texts in other rows
                ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]  # as collect() does
                source = "student" if j < N_STUDENT else "teacher"
                rollouts.append(train.Rollout(p, chat_prompt(tok, p.messages), ids, text, source,
                                              deploy=source == "student" and j == 0,
                                              reward=reward, gt_pass=gt_pass, hacked=hacked))
        steps.append(rollouts)
    # routeA's step log, as a yoked arm reads it: its counts, and its label-derived columns
    yoke = [{"step": s, "n_students": 3 * N_STUDENT, "n_route": 2 + s % 2, "n_keep": 3, "n_absorb": 4 - s % 2,
             "n_route_teacher": 1, "n_keep_teacher": s % 2, "n_absorb_teacher": 3 * N_TEACHER - 1 - s % 2,
             "reward_mean": 1.5, "hack_rate": 0.4, "solve_rate": 0.3} for s in range(STEPS)]
    write_jsonl(root / "yoke.jsonl", yoke)
    return root, lora, tok, steps, yoke


# gate.score cosine's band pairs: two authored pairs of each hack mode (the band reads no rollout)
BAND_PAIRS = [p for m in ("exit_code", "stdout_marker") for p in
              select(load_pairs([ROOT / "data" / "pairs" / f"hack_{m}.md"]), [m])[:2]]


def trace(cfg, lora, tok, steps) -> list[dict]:
    """What train()'s routing path produces over fixed graded steps, set up as train() sets it up:
    per step the scorer's features, scores, zones, and the gate's state after it."""
    gate = train.new_gate(cfg)
    direction = directions.gate_direction(cfg.name or cfg.arm.name, cfg.vact_dir, cfg.seed, cfg.gate.placebo_seed, lora)
    yoke = train.load_yoke(cfg) if cfg.arm.yoked else None
    # gate.score cosine: the pairs' band along the direction, as train() reads it (train.pair_band, the pairs alone)
    cosine = cfg.gate.score == "cosine" and cfg.arm.direction != "nll"
    band = train.pair_band(cfg, lora, tok, direction, BAND_PAIRS, None) if cosine else None
    out = []
    for step, rollouts in enumerate(steps):
        _, _, acts, scores, zones = train.routing_step(cfg, lora, tok, gate, direction, rollouts, step, yoke, {},
                                                       band)
        out.append({"acts": acts, "scores": scores, "zones": zones, "gate": gate.state_dict()})
    return out


def _same(x, y) -> bool:
    if torch.is_tensor(x):
        return torch.is_tensor(y) and torch.equal(x, y)  # bit for bit, not close
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return isinstance(y, (list, tuple)) and len(x) == len(y) and all(map(_same, x, y))
    return x == y


def differences(a: list[dict], b: list[dict]) -> list[str]:
    """Where two traces differ: empty when routing did not change."""
    assert len(a) == len(b)
    return [f"step {s}: {k} differs" for s, (x, y) in enumerate(zip(a, b)) for k in x if not _same(x[k], y[k])]


def relabel(steps, how: str, seed: int = 0):
    """The same rollouts with the grader's labels flipped, redrawn at random, or permuted across a
    step's rows; each step's labels are checked to have changed."""
    rng = random.Random(seed)
    out = []
    for rollouts in steps:
        labels = [(r.reward, r.gt_pass, r.hacked, r.hacked_strict) for r in rollouts]
        if how == "flipped":
            new = [(3.5 - rw, not gt, not hk, not hs) for rw, gt, hk, hs in labels]
        elif how == "random":
            new = [(rng.choice([-1.0, 0.0, 0.5, 3.5, 7.0]), rng.random() < 0.5, rng.random() < 0.5, rng.random() < 0.5)
                   for _ in labels]
        elif how == "permuted":
            new = list(labels)
            while new == labels:
                rng.shuffle(new)
        else:
            raise ValueError(how)
        assert new != labels
        out.append([dataclasses.replace(r, reward=rw, gt_pass=gt, hacked=hk, hacked_strict=hs)
                    for r, (rw, gt, hk, hs) in zip(rollouts, new)])
    return out


def _relabelled_yoke(root: Path, yoke: list[dict], how: str) -> Path:
    """routeA's step log with its label-derived columns changed and its counts kept."""
    path = root / f"yoke_{how}.jsonl"
    write_jsonl(path, [{**r, "reward_mean": -r["reward_mean"] - 1, "hack_rate": 1 - r["hack_rate"],
                        "solve_rate": 0.99} for r in yoke])
    return path


# The method gets every combination of the gate knobs the routing reads (cut rule, centering,
# scorer), half of them with the teacher rows gated too (by the parity of the other three, so
# each pair of knobs meets in every combination); every other arm (quantile: heldout, haar;
# pinned: none, absorb; yoked: placebo, random) gets two opposite corners of it, which differ in
# each knob.
# The score (gate.score: dot, or the seeds' band-normalised cosine, whose band trace() reads from the pairs as train()
# does) is a fifth knob: every combination above with dot, and the cosine at the two opposite corners, the last of
# which the other arms get.
GATE_VARIANTS = [dict(cut_rule=c, center=m, scorer=s,
                      teacher_zone="gate" if ((c == "step") + m + (s == "live")) % 2 else "absorb", score="dot")
                 for c in ("buffer", "step") for m in (False, True) for s in ("frozen", "live")]
GATE_VARIANTS += [dict(GATE_VARIANTS[0], score="cosine"), dict(GATE_VARIANTS[-1], score="cosine")]
# an antithetic family runs as draws: its −h draw here (RUN: the run name of each arm)
RUN = {a.name: arms.draw_name(a.name, 1, "n") if a.antithetic else a.name for a in arms.ARMS}
CASES = [("routeA", g) for g in GATE_VARIANTS] + \
    [(RUN[a.name], g) for a in arms.ARMS if a.name != "routeA" and not a.students
     for g in (GATE_VARIANTS[0], GATE_VARIANTS[-1])] + \
    [(a.name, dict(g, warmup=0)) for a in arms.ARMS if a.students
     for g in GATE_VARIANTS if g["teacher_zone"] == "gate"]
# an arm that gates the teacher rows alone (tgate) gates 6 a step here: it decides from its first
# past scores on


@pytest.mark.parametrize("arm,gate", CASES, ids=[f"{a}-{'-'.join(map(str, g.values()))}" for a, g in CASES])
def test_replacing_or_permuting_the_labels_changes_no_routing(fixed, arm, gate):
    root, lora, tok, steps, yoke = fixed
    cfg = _cfg(root, arm, root / "yoke.jsonl", **gate)
    real = trace(cfg, lora, tok, steps)
    if cfg.arm.policy == "quantile":  # the gate did decide (past warm-up): a leak had zones to move
        assert {"keep", "absorb", "route"} <= {z for s in real for z in s["zones"]}
    for how in ("flipped", "random", "permuted"):
        other = dataclasses.replace(cfg, yoke_log=str(_relabelled_yoke(root, yoke, how)))
        found = differences(real, trace(other, lora, tok, relabel(steps, how)))
        assert not found, f"labels {how}: {found}"


def test_the_reference_backend_routes_the_same_without_labels(fixed):
    """train.fast off: the live features come from the reference forward instead."""
    root, lora, tok, steps, _ = fixed
    cfg = _cfg(root, "routeA", fast=False, scorer="live", center=True)
    found = differences(trace(cfg, lora, tok, steps), trace(cfg, lora, tok, relabel(steps, "flipped")))
    assert not found, f"labels flipped: {found}"


def _leaky_route(cfg, gate, scores, rollouts, step, yoke):
    """A leak: hacked rows score higher before the gate (so they route more)."""
    return LEAK_FREE["route"](cfg, gate, scores + torch.tensor([float(r.hacked) for r in rollouts]),
                              rollouts, step, yoke)


def _leaky_teacher_route(cfg, gate, scores, rollouts, step, yoke):
    """A leak on the teacher rows alone: a hacked pool completion scores higher."""
    return LEAK_FREE["route"](cfg, gate, scores + torch.tensor([float(r.hacked and r.source == "teacher")
                                                                for r in rollouts]), rollouts, step, yoke)


def _leaky_live_acts(cfg, lora, seqs, rollouts):
    """A leak: the live scorer's features scaled by each row's reward."""
    acts, trunks = LEAK_FREE["live_acts"](cfg, lora, seqs, rollouts)
    w = torch.tensor([1.0 + r.reward for r in rollouts]).unsqueeze(1)
    return {m: a * w for m, a in acts.items()}, trunks


LEAK_FREE = {"route": train.route, "live_acts": train.live_acts, "to_seqs": train.to_seqs,
             "probe_gradients": features.probe_gradients, "frozen_nll": features.frozen_nll}


def _leaky_probe(monkeypatch):
    """A leak in routeV's feature: each row's probe gradient scaled by its reward (to_seqs hands the
    step's rollouts over, as a leaky scorer would keep them)."""
    held = {}

    def to_seqs(tok, rollouts):
        held["rollouts"] = rollouts
        return LEAK_FREE["to_seqs"](tok, rollouts)

    def probe_gradients(lora, seqs, **kw):
        w = torch.tensor([1.0 + r.reward for r in held["rollouts"]]).unsqueeze(1)
        return {m: g * w for m, g in LEAK_FREE["probe_gradients"](lora, seqs, **kw).items()}
    monkeypatch.setattr(train, "to_seqs", to_seqs)
    monkeypatch.setattr(features, "probe_gradients", probe_gradients)


def _leaky_nll(monkeypatch):
    """A leak in the nll control's ranking: each row's NLL lowered by its reward (so rewarded rows keep)."""
    held = {}

    def to_seqs(tok, rollouts):
        held["rollouts"] = rollouts
        return LEAK_FREE["to_seqs"](tok, rollouts)

    def frozen_nll(lora, seqs, **kw):
        return LEAK_FREE["frozen_nll"](lora, seqs, **kw) - torch.tensor([r.reward for r in held["rollouts"]],
                                                                       dtype=torch.float64)
    monkeypatch.setattr(train, "to_seqs", to_seqs)
    monkeypatch.setattr(features, "frozen_nll", frozen_nll)


@pytest.mark.parametrize("arm", ["routeA", "routeV"])
def test_the_check_catches_a_planted_leak_under_the_cosine_score(fixed, monkeypatch, arm):
    """gate.score cosine: the same check with a label-reading route planted must fail, and without it the band
    itself is the same number for every labelling (it is read from the pairs alone)."""
    root, lora, tok, steps, _ = fixed
    cfg = _cfg(root, arm, root / "yoke.jsonl", score="cosine")
    real = trace(cfg, lora, tok, steps)
    dot = trace(dataclasses.replace(cfg, gate=cfg.gate.model_copy(update={"score": "dot"})), lora, tok, steps)
    assert not torch.equal(real[-1]["scores"], dot[-1]["scores"])  # the cosine score did run
    assert not differences(real, trace(cfg, lora, tok, relabel(steps, "flipped")))
    monkeypatch.setattr(train, "route", _leaky_route)
    found = differences(trace(cfg, lora, tok, steps), trace(cfg, lora, tok, relabel(steps, "flipped")))
    assert any("zones differs" in f for f in found), f"a route that reads labels went unnoticed under cosine: {found}"


@pytest.mark.parametrize("part,leak,scorer,arm,teacher_zone", [
    ("route", _leaky_route, "frozen", "routeA", "absorb"),
    ("route", _leaky_route, "frozen", "placebo", "absorb"),
    ("route", _leaky_teacher_route, "frozen", "routeA", "gate"),
    ("route", _leaky_teacher_route, "frozen", "placebo", "gate"),
    ("live_acts", _leaky_live_acts, "live", "routeA", "absorb"),
    ("probe_gradients", _leaky_probe, "frozen", "routeV", "absorb"),
    ("frozen_nll", _leaky_nll, "frozen", "nll", "absorb")])
def test_the_check_catches_a_planted_leak(fixed, monkeypatch, part, leak, scorer, arm, teacher_zone):
    """The same check with a label-reading part planted in train's routing path must fail (a leak
    on the teacher rows too, once they are gated; in routeV's probe gradient)."""
    root, lora, tok, steps, _ = fixed
    if part in ("probe_gradients", "frozen_nll"):
        leak(monkeypatch)
    else:
        monkeypatch.setattr(train, part, leak)  # routing_step looks its parts up in train at call time
    cfg = _cfg(root, arm, root / "yoke.jsonl", scorer=scorer, teacher_zone=teacher_zone)
    found = differences(trace(cfg, lora, tok, steps), trace(cfg, lora, tok, relabel(steps, "flipped")))
    assert found, f"a {part} that reads labels went unnoticed"
    if part in ("live_acts", "probe_gradients", "frozen_nll"):
        assert "step 0: scores differs" in found
    assert any("zones differs" in f for f in found)
