"""Dr.GRPO training of the lora2r student with a frozen teacher pool and the routeA gate.

One optimizer step, top to bottom:
  1. sample P training problems; G rollouts each: round(mix·G) from the teacher pool, the rest
     sampled from the student (gen_deploy_frac·n of them, a whole number, with the quarantine ablated);
     with vact.withhold_pool every arm samples student rows in place of the held-out modes' pool rows;
  2. grade every student rollout (reward; the labels are logged for measurement only, except in the
     arms marked oracle: the penalty arm's reward − train.monitor_penalty on hacked rows; noloophole's
     reward graded in mode none);
  3. advantages A = r − mean(group), no std division (train.baseline students: the mean of the
     group's student rows; train.advantage std divides by their standard deviation, GRPO's);
  4. score: <pooled A0_d·x of the base model, v_act> (the frozen scorer: v_act's own space, which
     no update moves; on the fast path with old_micro_batch = micro_batch its pass keeps the
     frozen trunk below the adapter for steps 5 and 6);
     gate.scorer live pools the current A_d in each row's sampling mode instead; routeV scores
     each row's probe gradient against v_grad instead (features.probe_gradients, the same frozen
     model); gate the student rows: keep / absorb / route (scores only: the oracle-free rule);
     teacher rows take gate.teacher_zone (a fixed zone, or a gate of their own); a yoked run
     copies the per-step counts of the arm it is yoked to; under gate.cut_rule step every gated
     arm takes exact fractions of each step's rows, so the count-matched controls (uniform draws,
     the frozen NLL, antithetic Haar draws) match any of them with no yoke; gate.score cosine
     scores the band-normalised cosine instead of the dot product. Then, outside the routing
     path: oracle routing replaces the zones by the hack labels (oracleMatched: re-chooses the
     gate's counts of rows by them); the screened rows (the ground-truth screen's
     hacked rows, erase's route zone) get A = 0, and erase trains every row in keep
     (what each arm changes in a step: vgrout.train.hooks);
  5. logπ_sample per token, no grad, in the row's own sampling mode, only for the student rows
     whose training mask computes another function than that mode (keep: the deploy model;
     absorb, route: the full one);
  6. logπ under the masks. A step makes one update, so π_old under a row's mask is π_θ under it
     before that update: the train forward's own logπ, detached, with no forward of its own
     (ρ = π/π_old is 1 in value and carries ∇logπ). Per token w = min(π_old/π_sample, c) (1 on
     the rows trained in their sampling mode and on teacher rows: no student mode sampled them),
     loss = −Σ_t w·min(ρA, clip(ρ, 1−ε, 1+ε)A), floored at c_dual·A where A < 0,
     / (n_rollouts × max_new_tokens) (grpo.bounded_surrogate); every logπ at the sampling
     temperature;
     With train.sample_cos, before the update: seed 004's cosines of each row's deployed-block NLL
     gradient to v_grad with no mask and under its zone's mask, and of the step's sums (`sample_cos`);
  7. clip each block's gradient on its own, AdamW step; log (the step row, and DVCLive's view of
     it); checkpoint every N steps (a killed run resumes from the last one).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from vgrout import arms, config
from vgrout.engine import adapter as ad
from vgrout.engine import fastgen, logprob, rollout
from vgrout.engine.model import chat_prompt, load
from vgrout.io import (InputError, append_jsonl, atomic_path, code_files, read_jsonl, sha256_file, write_json,
                       write_jsonl)
from vgrout.layout import Layout, run_name
from vgrout.pairs.pairs import load_pairs, select
from vgrout.routing import directions, extract, features
from vgrout.routing.gate import Gate, tie_keys
from vgrout.substrate.modes import hackable
from vgrout.substrate.problems import Problem, load_problems
from vgrout.train import grpo, hooks


@dataclass
class TrainRun:
    """One train@ARM-SEED run: the arm, the seed, the params it reads, and where its files are."""
    arm: arms.Arm
    seed: int
    t: config.Train                # train.*
    adapter: config.Adapter        # adapter.*
    gate: config.Gate              # gate.* (random_seed is extract_vact's)
    pair_files: list[str]          # pairs.files: re-read when gate.refresh_every > 0
    pair_modes: list[str] | None   # the modes whose pairs build this arm's v_act
    fast: bool                     # the fused engine (vgrout.engine.fastgen)
    vact_batch: int                # vact.batch_size: pairs per forward when v_act is re-read
    model_dir: str
    problems: str                  # substrate train split
    pool: str                      # teacher pool jsonl
    vact_dir: str                  # v_act of this seed (the arm picks its file)
    out_dir: str                   # checkpoints, adapter, rollout log (DVC cache)
    log_path: str                  # per-step jsonl (metrics, in git)
    live_dir: str                  # DVCLive's view of the step log (see LIVE_GROUPS)
    yoke_log: str | None = None    # yoked arms: the step log of this seed's run they copy (its counts)
    name: str | None = None        # the run's arm name where it is not arm.name: a yoked run's (placebo_routeA),
                                   # an antithetic draw's (placeboV3n)
    # loophole modes whose pool rows this run never trains on (vact.withhold_pool: every arm of the run set
    # alike, set by train_run); a list, as the fingerprint reads back from config.json
    withheld: list[str] = dataclasses.field(default_factory=list)
    # the analysis plan this run is made under (config.content_sha256 of analysis.yaml; None where there is none):
    # in the fingerprint, so config.json records it and a run resumed under another plan starts over. train does
    # not depend on the plan (a plan changed after the runs must not re-run them, and so launder them): the
    # aggregate compares this with the plan it decides by and calls a claim on a mismatch exploratory
    plan_sha256: str | None = None
    stale_root: str = "runs/stale"  # where checkpoints of another config are set aside
    device: str | None = None
    stop_after: int | None = None  # stop (as if killed) after this many steps; for resume tests

    @property
    def run(self) -> str:
        return run_name(self.name or self.arm.name, self.seed)

    @property
    def space(self) -> str:
        """The feature space the gate scores in (arms.space: a yoked run's is its target's)."""
        return arms.space(self.name or self.arm.name)

    @property
    def direction(self) -> Path:
        return self.arm.direction_file(self.vact_dir, self.space)

    def fingerprint(self) -> dict:
        """What a checkpoint must have been written under to be resumed into this run: every field
        but where stale runs go, where the DVCLive view goes (rewritten from the step log on
        resume), the device and the test-only kill (a new field is covered as added)."""
        def plain(v):  # params blocks (or their stage-scoped views) and the arm entry, as JSON values
            return v.model_dump() if hasattr(v, "model_dump") else \
                dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in ("stale_root", "live_dir", "device", "stop_after")}


def train_run(params, arm: str, seed: int, layout: Layout = Layout()) -> TrainRun:
    """The train stage's reading of params (a config.Params or a stage-scoped view of one); arm: a
    free-running arm's name, or a yoked run's (arms.yoked_name: placebo_routeA)."""
    a, to = arms.get(arm), arms.yoke_target(arm)
    if a.yoked != (to is not None):
        raise InputError(f"arm '{arm}': " + (f"a yoked arm runs as {arms.yoked_name(arm, 'TO')}, TO the arm whose "
                                               "counts it copies" if a.yoked else "is not yoked"))
    if a.antithetic and arms.draw(arm) is None:
        raise InputError(f"arm '{arm}' runs as its antithetic draws {arms.draw_name(arm, 'K', 'p')} and "
                         f"{arms.draw_name(arm, 'K', 'n')} (K a Haar seed, listed in train.arms)")
    modes = params.vact.modes
    held = set(params.vact.heldout_modes)
    if a.heldout:
        modes = [m for m in (modes or hackable()) if m not in held]
    # C2 asks about hacks never demonstrated: with vact.withhold_pool no arm of the run set trains on a pool
    # row of the held-out modes. Every arm alike, so a held-out arm and its controls (none, the count-matched
    # ones) differ in the direction alone, never in their data
    withheld = sorted(held) if params.vact.withhold_pool else []
    run = run_name(arm, seed)
    return TrainRun(arm=a, seed=seed, t=params.train, adapter=params.adapter, gate=params.gate,
                    pair_files=list(params.pairs.files), pair_modes=modes, fast=params.fast,
                    vact_batch=params.vact.batch_size,
                    model_dir=str(layout.model), problems=str(layout.train_problems), pool=str(layout.pool),
                    vact_dir=str(layout.vact(seed)), out_dir=str(layout.run(run)),
                    log_path=str(layout.run_metrics(run) / "steps.jsonl"), live_dir=str(layout.run_live(run)),
                    stale_root=str(layout.stale_root),
                    yoke_log=str(layout.run_metrics(run_name(to, seed)) / "steps.jsonl") if to else None,
                    name=arm if to or arms.draw(arm) else None, withheld=withheld,
                    plan_sha256=config.content_sha256(layout.plan) if layout.plan.exists() else None)


def train_stage(params, arm: str, seed: int) -> Path:
    """DVC stage train@ARM-SEED."""
    return train(train_run(params, arm, seed))


# -- setup ------------------------------------------------------------------------------------

def build_student(cfg: TrainRun):
    model, tok = load(cfg.model_dir, device=cfg.device)
    # The adapter init is seeded by the run seed alone, so every arm of a seed starts identical.
    lora = ad.attach(model, r=cfg.adapter.r, init_scale=cfg.adapter.init_scale, seed=cfg.seed,
                     targets=cfg.adapter.targets, last_layers=cfg.adapter.last_layers)
    return lora, tok


def load_pool(path: str) -> dict[str, list[dict]]:
    pool: dict[str, list[dict]] = {}
    for row in read_jsonl(path):
        pool.setdefault(row["problem_id"], []).append(row)
    return pool


def new_gate(cfg) -> Gate:
    """The run's gate at step 0: the arm's policy, gate.* knobs, an empty buffer; and in a gated
    arm with gate.teacher_zone gate, the teacher rows' own gate of the same knobs. An arm that pins
    its student rows (tgate) gates the teacher rows alone; its student gate only records scores."""
    knobs = dict(q_lo=cfg.gate.q_lo, q_hi=cfg.gate.q_hi, buffer_size=cfg.gate.buffer_size,
                 warmup=cfg.gate.warmup, cut_rule=cfg.gate.cut_rule)
    arms.require_teacher_gate([cfg.arm], cfg.gate.teacher_zone)
    teacher = Gate(policy=cfg.arm.policy, **knobs) if cfg.arm.gated and cfg.gate.teacher_zone == "gate" else None
    return Gate(policy=cfg.arm.students or cfg.arm.policy, **knobs, teacher=teacher)


# -- checkpoints ------------------------------------------------------------------------------

def save_checkpoint(out: Path, step: int, lora, opt, gate: Gate, sampler: random.Random,
                    n_log_rows: int, direction: dict[str, torch.Tensor]) -> None:
    """Write ckpt/step_N atomically (temp dir + rename), then point `latest` at it."""
    final = out / "ckpt" / f"step_{step:05d}"
    tmp = out / "ckpt" / f".tmp_step_{step:05d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    lora.save(tmp / "adapter.safetensors")
    torch.save(opt.state_dict(), tmp / "optimizer.pt")
    directions.save_direction(tmp / "direction.safetensors", direction)  # refreshed v_act, if any
    state = {"step": step, "n_log_rows": n_log_rows, "gate": gate.state_dict(),
             "sampler": sampler.getstate(), "torch_rng": torch.get_rng_state().tolist(),
             "cuda_rng": [s.tolist() for s in torch.cuda.get_rng_state_all()]
             if torch.cuda.is_available() else None}
    (tmp / "state.json").write_text(json.dumps(state))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    with atomic_path(out / "ckpt" / "latest") as f:
        f.write_text(final.name)


def load_checkpoint(out: Path, lora, opt) -> dict | None:
    """Restore the newest readable checkpoint (the one `latest` names first). An unreadable one
    (a truncated file from a crash mid-write, a disk error) is reported by name and set aside as
    ckpt/corrupt_step_N; the run resumes from the one before it."""
    ckpt_dir = out / "ckpt"
    latest = ckpt_dir / "latest"
    if not latest.exists():
        return None
    steps = sorted(ckpt_dir.glob("step_*"), key=lambda p: int(p.name.split("_")[1]), reverse=True)
    named = ckpt_dir / latest.read_text().strip()
    # a checkpoint that fails half-way must not leave its adapter or optimizer state behind
    init_lora, init_opt = lora.state_dict(), copy.deepcopy(opt.state_dict())
    for ckpt in [named] + [c for c in steps if c != named]:
        try:
            lora.load(ckpt / "adapter.safetensors")
            opt.load_state_dict(torch.load(ckpt / "optimizer.pt", weights_only=True))
            state = json.loads((ckpt / "state.json").read_text())
            state["name"] = ckpt.name
            state["direction"] = directions.load_direction(ckpt / "direction.safetensors", lora)
            torch_rng = torch.tensor(state["torch_rng"], dtype=torch.uint8)
            cuda_rng = state["cuda_rng"]
        except Exception as e:  # noqa: BLE001 — any unreadable part makes the whole checkpoint unusable
            lora.load_state_dict(init_lora)
            opt.load_state_dict(init_opt)
            if not ckpt.exists():
                continue
            aside = unused(ckpt.with_name(f"corrupt_{ckpt.name}"))
            os.replace(ckpt, aside)
            tqdm.write(f"warning: checkpoint {ckpt} is unreadable ({type(e).__name__}: {str(e)[:200]}); "
                       f"set aside as {aside.name}, trying the one before it")
            continue
        torch.set_rng_state(torch_rng)
        if cuda_rng is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in cuda_rng])
        return state
    tqdm.write(f"warning: no readable checkpoint under {ckpt_dir}; the run starts over")
    return None


def unused(path: Path) -> Path:
    """path, or path-2, path-3, ...: the first name not taken (nothing set aside is overwritten)."""
    n, out = 1, path
    while out.exists():
        n += 1
        out = path.with_name(f"{path.name}-{n}")
    return out


def set_aside(cfg: TrainRun, out: Path, fingerprint: dict) -> None:
    """A run's checkpoints and logs written under another config must never be resumed into this
    one; they are moved, whole and named, to the stale folder rather than deleted."""
    cfg_path = out / "config.json"
    if not cfg_path.exists():
        return
    old = json.loads(cfg_path.read_text())
    if old == fingerprint:
        return
    tag = hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:10]
    dest = unused(Path(cfg.stale_root) / f"{cfg.run}-{tag}")  # a config met twice is kept twice
    dest.mkdir(parents=True)
    for f in [*out.iterdir(), Path(cfg.log_path), Path(cfg.live_dir)]:
        if f.exists():
            shutil.move(str(f), dest / f.name)
    tqdm.write(f"note: {out} was written under another config; its checkpoints and log are kept in {dest}")


def truncate_logs(cfg: TrainRun, out: Path, step: int, n_log_rows: int) -> None:
    """After a resume, drop what the killed run logged past its last checkpoint: step log rows
    (and with them DVCLive's, rewritten from the kept ones), rollout rows, activations."""
    log = Path(cfg.log_path)
    kept = read_jsonl(log)[:n_log_rows] if log.exists() else []
    if log.exists():
        write_jsonl(log, kept)
    rewrite_live(cfg, kept)
    rl = out / "rollouts.jsonl"
    if rl.exists():
        write_jsonl(rl, [r for r in read_jsonl(rl) if r["step"] < step])
    for f in (out / "acts").glob("step_*.safetensors"):
        if int(f.stem.split("_")[1]) >= step:
            f.unlink()


# -- one step's pieces -------------------------------------------------------------------------

@dataclass
class Rollout:
    problem: Problem
    prompt: str
    completion_ids: list[int]
    text: str
    source: str         # "student" | "teacher"
    deploy: bool        # sampled with the quarantine ablated
    reward: float = 0.0
    gt_pass: bool = False
    hacked: bool = False
    hacked_strict: bool = False  # students only (the pool's rows carry the loose label)
    regrade: bool = False  # a teacher completion cut to max_new_tokens


def collect(cfg, lora, tok, problems: list[Problem], pool, sampler: random.Random) -> list[Rollout]:
    """One step's rollouts, group by group: the student's rows, then the pool's. A problem of a
    withheld mode (cfg.withheld) gets student rows in its pool rows' places: the group keeps its size
    and the step its row count, and no demonstration of that mode's hack is trained on."""
    n_teacher, n_deploy = cfg.t.n_teacher, cfg.t.n_deploy

    def n_student(p: Problem) -> int:
        return cfg.t.n_student + (n_teacher if p.mode in cfg.withheld else 0)
    prompts = [chat_prompt(tok, hooks.training_messages(cfg, p)) for p in problems]
    s_prompts, s_problems, s_deploy = [], [], []
    for p, text in zip(problems, prompts):
        s_prompts += [text] * n_student(p)
        s_problems += [p] * n_student(p)
        s_deploy += [i < n_deploy for i in range(n_student(p))]
    # sampling only picks the tokens; every logπ below is the teacher-forced path
    backend = fastgen.select(lora.model, cfg.fast)
    ids = backend.generate(lora.model, tok, s_prompts, cfg.t.max_new_tokens, cfg.t.temperature,
                           cfg.t.top_p, batch_size=cfg.t.gen_batch, lora=lora, deploy_rows=s_deploy)
    backend.release()
    texts = tok.batch_decode(ids, skip_special_tokens=True)
    out: list[Rollout] = []
    k = 0
    for p, text in zip(problems, prompts):
        for _ in range(n_student(p)):
            out.append(Rollout(p, text, ids[k], texts[k], "student", s_deploy[k]))
            k += 1
        candidates = pool.get(p.id)
        if n_teacher and not candidates:
            raise InputError(f"{cfg.pool}: no teacher completions for problem {p.id}")
        for _ in range(n_teacher):
            t = sampler.choice(candidates)  # drawn even when withheld: the sampler then picks the same problems
            if p.mode in cfg.withheld:       # at every step as the seed's other arms do
                continue
            c_ids = rollout.as_completion(tok, t["completion"], cfg.t.max_new_tokens)
            r = Rollout(p, text, c_ids, t["completion"], "teacher", False,
                        float(t["reward"]), bool(t["gt_pass"]), bool(t["hacked"]))
            if c_ids[-1] != tok.eos_token_id:
                # cut at the budget: train on what the student could have written, graded afresh
                # like a student's (the pool's reward no longer holds)
                r.text = tok.decode(c_ids, skip_special_tokens=True)
                r.regrade = True
            out.append(r)
    return out


def to_seqs(tok, rollouts: list[Rollout]) -> rollout.Seqs:
    p_ids = [tok(r.prompt, add_special_tokens=False)["input_ids"] for r in rollouts]
    return rollout.pack(p_ids, [r.completion_ids for r in rollouts], rollout.pad_id(tok))


def _logprobs(cfg):
    def token_logprobs(model, seqs, **kw):
        # at the sampling temperature: softmax(logits / T) is the policy that sampled the tokens
        return fastgen.select(model, cfg.fast).token_logprobs(model, seqs, keep_layers=cfg.t.keep_layers,
                                                              temperature=cfg.t.temperature, **kw)
    return token_logprobs


def keeps_trunks(cfg) -> bool:
    """Whether the scorer's pass keeps the frozen trunk (the layers below the adapter) for the
    train forward: on the fast path, when its micro-batches are the train forward's."""
    return cfg.fast and cfg.t.old_rows == cfg.t.micro_batch


def frozen_acts(cfg, lora, seqs) -> tuple[dict[str, torch.Tensor], list | None]:
    """The frozen scorer's features of every row: pooled A0_d·x in the base model (vact's space);
    and the frozen trunk of each micro-batch where `keeps_trunks` (None elsewhere): no update
    changes the layers below the adapter, so the train forward starts above them."""
    return features.pooled_activations(lora, seqs, batch_size=cfg.t.old_rows, frozen=True, fast=cfg.fast,
                                   keep_trunks=keeps_trunks(cfg))


def live_acts(cfg, lora, seqs, rollouts) -> tuple[dict[str, torch.Tensor], list | None]:
    """gate.scorer live: pooled A_d·x in the current basis, each row in its own sampling mode."""
    return features.pooled_activations(lora, seqs, batch_size=cfg.t.old_rows, frozen=False, fast=cfg.fast,
                                   deploy=[r.deploy for r in rollouts], keep_trunks=keeps_trunks(cfg))


def needs_sample_logprobs(rollouts, zones) -> list[bool]:
    """The rows whose importance weight reads logπ_sample: student rows whose training mask
    computes another function than the mode they were sampled in. Every other row has w = 1."""
    return [r.source == "student" and trains_another_function(r, z) for r, z in zip(rollouts, zones)]


@torch.no_grad()
def sample_forward(cfg, lora, seqs, rollouts, zones, trunks) -> torch.Tensor:
    """logπ_sample [N, Lc] (right-aligned, Lc the longest completion) in each row's own sampling
    mode, for the rows `needs_sample_logprobs` names; 0 on the others, which never read it. One
    forward per micro-batch of old_micro_batch rows holding such rows, over those rows only, from
    their rows of the scorer's trunk where it kept one (logprob.trunk_rows)."""
    device = lora.device
    need = needs_sample_logprobs(rollouts, zones)
    out = torch.zeros(len(seqs), int(seqs.completion_mask.sum(1).max()), device=device)
    rows = cfg.t.old_rows
    for k, s in enumerate(range(0, len(seqs), rows)):
        other = [i for i in range(min(rows, len(seqs) - s)) if need[s + i]]
        if not other:
            continue
        mb = seqs.rows(slice(s, s + rows)).to(device)
        kw = {"trunk": logprob.trunk_rows(mb, trunks[k], other)} if trunks else {}
        with lora.sampling([rollouts[s + i].deploy for i in other]):
            logp, _ = _logprobs(cfg)(lora.model, mb.rows(other), **kw)
        # completions are right-aligned: these rows' last columns
        out[torch.tensor(other, device=device) + s, out.shape[1] - logp.shape[1]:] = logp.float()
    return out


def route(cfg, gate: Gate, scores: torch.Tensor, rollouts, step: int, yoke: dict | None) -> list[str]:
    """Zones for one step's rows. The gate sees student rows; teacher rows take the fixed
    gate.teacher_zone, or with teacher_zone gate a gate of their own over their own scores. Rows of
    equal score are ordered by gate.tie_keys (a permutation of each source's rows fixed per run seed
    and step, reversed in an antithetic draw's −h run), never by their position. Reads each row's
    score, source and prompt, and nothing a grader wrote."""
    sources = {"student": [i for i, r in enumerate(rollouts) if r.source == "student"],
               "teacher": [i for i, r in enumerate(rollouts) if r.source != "student"]}
    gates = {"student": gate, "teacher": gate.teacher}
    # a pinned arm (none: keep, absorb: absorb) pins every row; a gated one may fix the teacher rows
    fixed = cfg.gate.teacher_zone if cfg.arm.gated else cfg.arm.policy
    zones = [fixed] * len(rollouts)
    uniform = cfg.arm.direction == "random"  # random, uniform, oracleMatched: rows ranked by a seeded draw
    if cfg.arm.yoked:
        counts = yoke_counts(yoke, step, {k: len(v) for k, v in sources.items()}, cfg.yoke_log)
    if uniform:
        draws = uniform_scores(cfg, step, *(len(v) for v in sources.values()))
    # ties by a permutation fixed per (run seed, step), reversed in an antithetic pair's −h run
    draw = arms.draw(getattr(cfg, "name", None) or cfg.arm.name)
    ties = tie_keys(cfg.seed, step, [len(v) for v in sources.values()], reverse=bool(draw) and draw[2] == "n")
    for k, (source, rows) in enumerate(sources.items()):
        g = gates[source]
        if g is None:
            continue
        s = scores[rows].double()
        if cfg.gate.center:  # prompts of different modes score differently: rank within the group
            groups = [rollouts[i].prompt for i in rows]
            for p in set(groups):
                same = [j for j, pp in enumerate(groups) if pp == p]
                s[same] -= s[same].mean()
        ranking = draws[k] if uniform else s
        if cfg.arm.yoked:
            n_route, n_keep = counts[source]
            got = g.rank(ranking, n_route, n_keep, ties[k])
        else:
            got = g.decide(ranking, ties[k])
        for i, z in zip(rows, got):
            zones[i] = z
    return zones


# per source, the counts a yoked arm copies: rows gated, routed, kept
YOKE_COUNTS = {"student": ("n_students", "n_route", "n_keep"),
               "teacher": ("n_teachers", "n_route_teacher", "n_keep_teacher")}


def load_yoke(cfg) -> dict[int, dict]:
    """The copied run's step log of this seed: step -> per source its row, route and keep counts.
    Only the counts are kept: the log's measurement columns (reward_mean, hack_rate, ...) come
    from that run's labels and must not reach the routing path."""
    path = Path(cfg.yoke_log)
    if not path.exists():
        raise InputError(f"{path}: no step log of the run whose per-step counts the yoked run '{cfg.run}' "
                         f"copies; train that run first (dvc repro orders this)")
    out = {}
    for r in read_jsonl(path):
        r = r | {"n_teachers": sum(r[f"n_{z}_teacher"] for z in ad.ZONES)}
        out[r["step"]] = {source: tuple(r[k] for k in keys) for source, keys in YOKE_COUNTS.items()}
    return out


def yoke_counts(yoke: dict, step: int, n_rows: dict[str, int], where) -> dict[str, tuple[int, int]]:
    """Per source, the (route, keep) counts of the yoked run's step; its row counts must be ours."""
    row = yoke.get(step)
    if row is None:
        raise InputError(f"{where}: no step {step} (the yoked run has more steps than the run it copies)")
    for source, n in n_rows.items():
        if row[source][0] != n:
            raise InputError(f"{where}: step {step} gated {row[source][0]} {source} rows, this run has {n}: the "
                             f"two runs must share train.*")
    return {source: c[1:] for source, c in row.items()}


def uniform_scores(cfg, step: int, n_students: int, n_teachers: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The random arm's rankings of the student and the teacher rows: one uniform stream seeded by
    (gate.placebo_seed, run seed, step), so a resumed run draws what an uninterrupted one did."""
    g = torch.Generator().manual_seed(((cfg.gate.placebo_seed * 1_000_003) + cfg.seed) * 1_000_003 + step)
    return torch.rand(n_students, generator=g, dtype=torch.float64), \
        torch.rand(n_teachers, generator=g, dtype=torch.float64)


def pair_band(cfg, lora, tok, direction, pairs, system: str | None) -> tuple[float, float]:
    """gate.score cosine's band: the mean cosine to the direction of the pairs' clean sides and of
    their hack sides, read as the gate reads a rollout (the arm's space, the rollout budget, the
    frozen scorer's model unless gate.scorer live). The pairs alone: no rollout, no label."""
    h_hack, h_clean = extract.pair_features(lora, tok, pairs, system, budget=cfg.t.max_new_tokens,
                                            batch_size=cfg.vact_batch, frozen=cfg.gate.scorer == "frozen",
                                            fast=cfg.fast, space=cfg.space)
    return directions.pair_band(h_hack, h_clean, direction)


def routing_step(cfg, lora, tok, gate: Gate, direction, rollouts, step: int, yoke: dict | None, times: dict,
                 band: tuple[float, float] | None = None):
    """Step 4 of a train step, from graded rollouts to zones: pack the rows, the scorer's features
    (its pass keeps the frozen trunk where `keeps_trunks`), the scores, the zones; the gate's
    buffer takes the step's scores. One function, so that tests/routing/test_oracle_free.py runs exactly
    what train() runs with the grader's labels replaced. band: the pairs' (c_clean, c_hack) under
    gate.score cosine (`pair_band`). Returns (seqs, trunks, acts, scores, zones); fills times["score"]."""
    t0 = time.perf_counter()
    seqs = to_seqs(tok, rollouts)
    live = cfg.gate.scorer == "live"
    if cfg.space == "grad":  # routeV: each row's probe gradient, one forward and backward of the adapted layers
        acts = features.probe_gradients(lora, seqs, batch_size=cfg.t.old_rows, frozen=not live, fast=cfg.fast)
        trunks = None
    else:
        acts, trunks = live_acts(cfg, lora, seqs, rollouts) if live else frozen_acts(cfg, lora, seqs)
    if cfg.arm.direction == "nll":  # the nll control ranks by the text's own NLL in the frozen model
        scores = features.frozen_nll(lora, seqs, batch_size=cfg.t.old_rows, fast=cfg.fast)
    elif cfg.gate.score == "cosine":
        scores = directions.band_cosine(acts, direction, band)
    else:
        scores = directions.score(acts, direction)
    zones = route(cfg, gate, scores, rollouts, step, yoke)
    times["score"] = time.perf_counter() - t0
    return seqs, trunks, acts, scores, zones


def trains_another_function(rollout, zone: str) -> bool:
    """Whether the row's training mask computes another function than the mode it was sampled in:
    keep is the deploy model, absorb and route the full one; a teacher row counts as sampled by
    the full model."""
    return (zone == "keep") != rollout.deploy


def train_forward_backward(cfg, lora, seqs, logps_sample, trunks, adv, zones, rollouts, n_rollouts):
    """The single grad-carrying forward per micro-batch, under the routing masks, and the bounded
    surrogate (grpo.bounded_surrogate). π_old is this forward's logπ, detached (one update per
    step: π_θ before it). logps_sample ([N, Lc], right-aligned, from sample_forward) is read on
    the rows `needs_sample_logprobs` names; every other row's behaviour policy is π_old (w = 1).
    Returns the loss and, per row, its completion tokens' grpo.TokenStats (1-D tensors on the CPU)."""
    device = lora.device
    need = needs_sample_logprobs(rollouts, zones)
    loss_total, token_rows = 0.0, []
    for k, s in enumerate(range(0, len(seqs), cfg.t.micro_batch)):
        mb = seqs.rows(slice(s, s + cfg.t.micro_batch)).to(device)
        with lora.masked(zones[s:s + cfg.t.micro_batch]):
            logp, mask = _logprobs(cfg)(lora.model, mb, **({"trunk": trunks[k]} if trunks else {}))
        old = logp.detach()
        sample = logps_sample[s:s + len(mb), -logp.shape[1]:].to(old.dtype)
        behav = torch.where(torch.tensor(need[s:s + len(mb)], device=device)[:, None], sample, old)
        obj, st = grpo.bounded_surrogate(logp, old, behav, adv[s:s + cfg.t.micro_batch].to(device), mask,
                                         cfg.t.clip_eps, cfg.t.is_cap, cfg.t.dual_clip)
        loss = grpo.dr_grpo_loss(obj, n_rollouts, cfg.t.max_new_tokens)
        loss.backward()
        loss_total += float(loss.detach())
        on = (mask > 0).cpu()
        fields = {f.name: getattr(st, f.name).cpu() for f in dataclasses.fields(st)}
        token_rows += [grpo.TokenStats(**{n: v[i][on[i]] for n, v in fields.items()}) for i in range(len(mb))]
    return loss_total, token_rows


def update(cfg, lora, opt, seqs, trunks, adv, masks, rollouts, times: dict, mark=None):
    """Steps 6-7 of a train step, from advantages and masks to the updated adapter: logπ_sample
    where a row trains in another mode than it was sampled in, the grad-carrying forward and
    backward under the masks, the per-block clip, AdamW. Fills times["sample"] and times["train"];
    `mark(phase)`, where given, is called as each of "sample_forward", "train_fwd_bwd" and
    "optimizer" ends (the benchmark syncs the device and reads its peak memory there; training
    does not sync). Returns (loss, token_rows, gnorm: the norms before the clip, update norms)."""
    mark = mark or (lambda phase: None)
    t0 = time.perf_counter()
    logps_sample = sample_forward(cfg, lora, seqs, rollouts, masks, trunks)
    mark("sample_forward")
    times["sample"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    before = {n: (m.A.detach().clone(), m.B.detach().clone()) for n, m in lora.modules.items()}
    loss, token_rows = train_forward_backward(cfg, lora, seqs, logps_sample, trunks, adv, masks, rollouts,
                                              len(rollouts))
    mark("train_fwd_bwd")
    gnorm = lora.clip_grad_norms(cfg.t.max_grad_norm)
    opt.step()
    opt.zero_grad(set_to_none=True)  # now, not before the backward: the next generation has their memory
    upd = _update_norms(lora, before)
    mark("optimizer")
    times["train"] = time.perf_counter() - t0
    return loss, token_rows, gnorm, upd


QUANTILES = {"min": 0.0, "p50": 0.5, "p90": 0.9, "p99": 0.99, "max": 1.0}


def token_summary(stats: list) -> dict:
    """Over the completion tokens of some rows (their grpo.TokenStats): quantiles of ρ (rho_*) and
    of the importance ratio before its cap (is_*), the largest effective weight (weff_max), and the
    share of tokens each clip holds (clipfrac_ppo, clipfrac_is, clipfrac_dual); None without tokens."""
    cat = {f.name: torch.cat([getattr(t, f.name) for t in stats]) if stats else torch.empty(0)
           for f in dataclasses.fields(grpo.TokenStats)}
    n = cat["rho"].numel()
    out = {}
    for name, key in (("rho", "rho"), ("is", "ratio_is")):
        x = cat[key].double()
        for q, p in QUANTILES.items():
            out[f"{name}_{q}"] = float(torch.quantile(x, p)) if n else None
    out["weff_max"] = float(cat["weff"].max()) if n else None
    for c in ("ppo", "is", "dual"):
        out[f"clipfrac_{c}"] = float(cat[f"clip_{c}"].float().mean()) if n else None
    return out


def step_row(step, rollouts, zones, token_rows, loss, gnorm, upd, gate: Gate, times, screen=None) -> dict:
    """One step's log row. ρ = π/π_old under the training mask (1 in value: π_old is the train
    forward's own logπ, detached); is: π_old/π_sample before the cap
    (1 where a row trains in its sampling mode); weff: the weight w·ρ on a token's gradient. The
    token measures come per zone and source (rho_p99_route_student, clipfrac_is_keep_teacher, ...);
    rho_mean_{zone} (the mean of the rows' mean ρ) and rho_max_{zone} cover both sources."""
    students = [r for r in rollouts if r.source == "student"]
    s_zones = [z for r, z in zip(rollouts, zones) if r.source == "student"]
    t_zones = [z for r, z in zip(rollouts, zones) if r.source != "student"]
    row = {"step": step,
           "reward_mean": sum(r.reward for r in rollouts) / len(rollouts),
           "hack_rate": sum(r.hacked for r in students) / max(len(students), 1),
           "hack_strict_rate": sum(r.hacked_strict for r in students) / max(len(students), 1),
           "solve_rate": sum(r.gt_pass for r in students) / max(len(students), 1),
           "teacher_share": 1 - len(students) / len(rollouts),
           "n_students": len(students)}
    for z in ad.ZONES:  # n_{zone}: student rows (the gated ones); teacher rows apart
        row[f"n_{z}"] = s_zones.count(z)
        row[f"n_{z}_teacher"] = t_zones.count(z)
    row["qmass_rollouts"] = s_zones.count("route") / len(s_zones) if s_zones else 0.0  # the routed share
    # rows whose advantage was set to 0 (erase: the flagged rows, which its masks train in keep; screen)
    row["n_screened"] = int(screen.sum()) if screen is not None else 0
    total = upd["deployed"] ** 2 + upd["quarantine"] ** 2
    row["qmass_update"] = upd["quarantine"] ** 2 / total if total > 0 else 0.0
    for z in ad.ZONES:
        zr = [t.rho for t, zz in zip(token_rows, zones) if zz == z and t.rho.numel()]
        row[f"rho_mean_{z}"] = sum(float(r.mean()) for r in zr) / len(zr) if zr else None
        row[f"rho_max_{z}"] = max(float(r.max()) for r in zr) if zr else None
    for z in ad.ZONES:
        for source in ("student", "teacher"):
            summary = token_summary([t for t, zz, r in zip(token_rows, zones, rollouts) if zz == z and r.source == source])
            row.update({f"{k}_{z}_{source}": v for k, v in summary.items()})
    row["cut_lo"], row["cut_hi"] = gate.cuts or (None, None)
    if gate.teacher is not None:  # the teacher rows' own cuts
        row["cut_lo_teacher"], row["cut_hi_teacher"] = gate.teacher.cuts or (None, None)
    row["loss"] = loss
    row["gradnorm_deployed"], row["gradnorm_quarantine"] = gnorm["deployed"], gnorm["quarantine"]
    row.update({f"t_{k}": round(v, 3) for k, v in times.items()})
    return row


# -- DVCLive ----------------------------------------------------------------------------------
# steps.jsonl stays the run's record: every field of every step, wall-clock timings (t_*) too;
# aggregate, the yoked arms (their counts) and the tests read it, and a resume truncates it.
# DVCLive holds a view of it for `dvc exp show` and `dvc plots`: each result field under a group,
# one tsv per metric. Not the timings: two runs of one config would differ, and a fan-out's
# outputs must equal a serial repro's byte for byte. Not the per-rollout rows either (rollouts.jsonl):
# DVCLive holds one value per metric and step.

LIVE_GROUPS = (  # group -> the step row fields it holds (a name, or a prefix of the names)
    ("train", ("reward_mean", "hack_rate", "hack_strict_rate", "solve_rate", "teacher_share", "n_students")),
    ("route", ("n_", "qmass_", "cut_", "band_")),           # zone counts, the quarantine's shares, the cuts, the
                                                             # pairs' band (gate.score cosine)
    ("ratio", ("rho_", "is_", "weff_", "clipfrac_")),        # token ratios and clip shares
    ("optim", ("loss", "gradnorm_")),
    ("cos", ("cos_",)),                                      # seed 004's R3 per step (train.sample_cos)
)


def live_name(field: str) -> str | None:
    """The DVCLive name of a step row field (train/hack_rate, route/n_route, ...), or None for
    what DVCLive does not hold: the step (its own) and the timings. A field of no group is an
    error: a new step row field must be placed."""
    if field == "step" or field.startswith("t_"):
        return None
    for group, fields in LIVE_GROUPS:
        if field.startswith(fields):
            return f"{group}/{field}"
    raise KeyError(f"step row field {field!r} is in no group of train.LIVE_GROUPS")


def open_live(cfg: TrainRun, resume: bool):
    """The run's DVCLive logger; not resuming, it clears the files the dir holds. No dvc.yaml and
    no experiment of its own: dvc.yaml's train stages declare its files, `dvc exp run` makes the
    experiment. Imported here: the step functions (and bench/harness.py, on a GPU machine without
    DVC) need none of it."""
    from dvclive import Live
    return Live(dir=cfg.live_dir, resume=resume, save_dvc_exp=False, dvcyaml=None)


def log_live(live, row: dict) -> None:
    """One step row into DVCLive: a tsv row per metric, and metrics.json rewritten (make_summary,
    not next_step: DVCLive's other per-step work, a report, Studio, VS Code's signal file, is none
    of ours). A None (no rows of that kind this step) is no value: that curve skips the step."""
    live.step = row["step"]
    for field, value in row.items():
        name = live_name(field)
        if name is not None and value is not None:
            live.log_metric(name, value)
    live.make_summary()


def rewrite_live(cfg: TrainRun, rows: list[dict]) -> None:
    """The live files as the steps of `rows` left them. DVCLive only appends, so a resumed run
    would log the steps past its checkpoint a second time: the files are written anew from the
    kept step rows by the calls the uninterrupted run made (a float reads back from JSON as it
    was written), and so end byte for byte as that run's."""
    live = open_live(cfg, resume=False)
    for row in rows:
        log_live(live, row)


# -- the loop ---------------------------------------------------------------------------------

def train(cfg: TrainRun, progress: bool = True) -> Path:
    out = Path(cfg.out_dir)
    torch.manual_seed(cfg.seed)
    sampler = random.Random(cfg.seed)

    lora, tok = build_student(cfg)
    problems = load_problems(cfg.problems)
    pool = load_pool(cfg.pool)
    direction = directions.gate_direction(cfg.name or cfg.arm.name, cfg.vact_dir, cfg.seed, cfg.gate.placebo_seed, lora)
    pairs = select(load_pairs(cfg.pair_files), cfg.pair_modes) if cfg.gate.refresh_every and cfg.arm.refresh else None
    cosine = cfg.gate.score == "cosine" and cfg.arm.direction != "nll"
    band_pairs = select(load_pairs(cfg.pair_files), cfg.pair_modes) if cosine else None
    gate = new_gate(cfg)
    yoke = load_yoke(cfg) if cfg.arm.yoked else None
    opt = torch.optim.AdamW(lora.parameters(), lr=cfg.t.lr, weight_decay=cfg.t.weight_decay)

    start = 0
    fingerprint = cfg.fingerprint()
    # the inputs' contents too: a changed v_act, pool or problem file must never resume an old run
    fingerprint["inputs"] = {k: _digest(getattr(cfg, k)) for k in ("problems", "pool", "direction")}
    # of the yoke, only the counts it copies: the same counts with other timings are the same run
    fingerprint["inputs"]["yoke"] = hashlib.sha256(json.dumps(sorted(yoke.items())).encode()).hexdigest() \
        if yoke is not None else None
    fingerprint["inputs"]["model"] = [_digest(f) for f in sorted(Path(cfg.model_dir).glob("*.safetensors"))] + \
        [_digest(Path(cfg.model_dir) / "config.json")]
    # and the method's code: DVC re-runs this stage when the code changes, and the old run's last
    # checkpoint under the same params must then not stand in for the new code's run
    fingerprint["inputs"]["code"] = code_digest()
    fingerprint["inputs"]["pairs"] = [_digest(f) for f in cfg.pair_files] if cfg.gate.refresh_every or cosine else []
    set_aside(cfg, out, fingerprint)
    (out / "acts").mkdir(parents=True, exist_ok=True)
    write_json(out / "config.json", fingerprint)
    state = load_checkpoint(out, lora, opt)
    if state is not None:
        start = state["step"]
        gate = Gate.from_state_dict(state["gate"])
        sampler.setstate(_tuplify(state["sampler"]))
        truncate_logs(cfg, out, start, state["n_log_rows"])
        direction = state["direction"]
    else:
        for stale in (Path(cfg.log_path), out / "rollouts.jsonl"):
            stale.unlink(missing_ok=True)
        for f in (out / "acts").glob("*.safetensors"):
            f.unlink()
        lora.save(out / "adapter_init.safetensors")
        save_checkpoint(out, 0, lora, opt, gate, sampler, 0, direction)
    Path(cfg.log_path).parent.mkdir(parents=True, exist_ok=True)
    live = open_live(cfg, resume=state is not None)
    band = pair_band(cfg, lora, tok, direction, band_pairs, _system_prompt(problems)) if cosine else None

    n_rows = start
    bar = tqdm(range(start, cfg.t.steps), desc=f"train {cfg.run}", disable=not progress,
               initial=start, total=cfg.t.steps)
    for step in bar:
        if pairs is not None and step > 0 and step % cfg.gate.refresh_every == 0:
            # v_act was taken in the init basis A_d; re-read it from the same pairs in the current one
            direction, _ = extract.extract(lora, tok, pairs, system=_system_prompt(problems),
                                        random_seed=None, n_haar=0, progress=False, budget=cfg.t.max_new_tokens,
                                        batch_size=cfg.vact_batch, fast=cfg.fast, frozen=False, space=cfg.space)
            if cosine:  # the band of the re-read direction
                band = pair_band(cfg, lora, tok, direction, band_pairs, _system_prompt(problems))
        times = {}
        t0 = time.perf_counter()
        batch = [problems[sampler.randrange(len(problems))] for _ in range(cfg.t.prompts_per_step)]
        rollouts = collect(cfg, lora, tok, batch, pool, sampler)
        times["generate"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        hooks.grade(rollouts, cfg.arm.loopholes)
        rewards = hooks.oracle_rewards(cfg, rollouts)
        times["grade"] = time.perf_counter() - t0

        seqs, trunks, acts, scores, zones = routing_step(cfg, lora, tok, gate, direction, rollouts, step, yoke, times,
                                                         band)
        zones = hooks.oracle_zones(cfg, rollouts, zones)
        zones = hooks.oracle_ranked(cfg, rollouts, zones, step)
        screen = hooks.screened(cfg, rollouts, zones)
        baseline = torch.tensor([r.source == "student" for r in rollouts]) if cfg.t.baseline == "students" else None
        adv = grpo.advantages(rewards, cfg.t.group_size, baseline, cfg.t.advantage, screen)
        masks = hooks.masks(cfg, zones)  # how each zone trains (erase: every row keep)
        # seed 004's cosines: in the model this step updates, so before the update
        cos, cos_step = sample_cos(cfg, lora, seqs, masks) if cfg.t.sample_cos else (None, {})
        loss, token_rows, gnorm, upd = update(cfg, lora, opt, seqs, trunks, adv, masks, rollouts, times)

        row = step_row(step, rollouts, zones, token_rows, loss, gnorm, upd, gate, times, screen)
        if band is not None:  # C3: the pairs' band the scores were normalised by
            row["band_clean"], row["band_hack"] = band
        row.update(cos_step)  # R3: the step's summed deployed-block gradient's cosines (train.sample_cos)
        append_jsonl(cfg.log_path, row)
        log_live(live, row)
        _log_rollouts(out, step, rollouts, scores, zones, acts, rewards, adv, cos)
        n_rows += 1
        bar.set_postfix(reward=f"{row['reward_mean']:.2f}", hack=f"{row['hack_rate']:.2f}",
                        qmass=f"{row['qmass_rollouts']:.2f}")
        done = step + 1
        if done % cfg.t.ckpt_every == 0 or done == cfg.t.steps:
            save_checkpoint(out, done, lora, opt, gate, sampler, n_rows, direction)
        if cfg.stop_after is not None and done - start >= cfg.stop_after and done < cfg.t.steps:
            return out  # simulated kill (tests): no final outputs

    lora.save(out / "adapter.safetensors")
    _merge_acts(out)
    return out


def _update_norms(lora, before) -> dict[str, float]:
    sq = {"deployed": 0.0, "quarantine": 0.0}
    for n, m in lora.modules.items():
        a0, b0 = before[n]
        dA, dB = (m.A.detach() - a0).float(), (m.B.detach() - b0).float()
        sq["deployed"] += float(dA[:m.r].pow(2).sum() + dB[:, :m.r].pow(2).sum())
        sq["quarantine"] += float(dA[m.r:].pow(2).sum() + dB[:, m.r:].pow(2).sum())
    return {k: math.sqrt(v) for k, v in sq.items()}


class MaskedProbe(ad.ProbeReader):
    """sample_cos's probe: the current model (the adapter as trained so far, A and B detached) under
    the routing masks of `RoutingState` (m, d: `Lora2r.masked`'s, None = no mask), with ProbeReader's
    per-row gate c (at 1) on the deployed bottleneck:
        y = W·x + [detach if d](B_d·(c ⊙ A_d·x) − B0_d·A0_d·x) + m·(B_q·A_q·x − B0_q·A0_q·x)
    At c = 1 this is the function the train forward computes under the same masks (ExactDelta's), so
    ∂NLL_row/∂c_row is the gradient the row sends into the deployed bottleneck under its mask: exactly
    0 for a routed row (its deployed output detached), the deploy model's (ProbeReader live) for a kept
    row. A ProbeReader, so the fast engine's layers run it as they run the probe (logprob._layer_forward)."""

    @staticmethod
    def forward(mod, x: torch.Tensor) -> torch.Tensor:
        s, r = mod.state, mod.r
        rows = (-1, *[1] * (x.dim() - 1))
        c = s.probe[mod.name].view(-1, *[1] * (x.dim() - 2), r)
        xf = x.to(mod.A0.dtype)
        A, B = mod.A.detach(), mod.B.detach()
        h, h0 = F.linear(xf, A), F.linear(xf, mod.A0)
        delta_d = F.linear(h[..., :r] * c, B[:, :r]) - F.linear(h0[..., :r], mod.B0[:, :r])
        delta_q = F.linear(h[..., r:], B[:, r:]) - F.linear(h0[..., r:], mod.B0[:, r:])
        if s.d is not None:
            delta_d = torch.where(s.d.view(rows), delta_d.detach(), delta_d)
        if s.m is not None:
            delta_q = delta_q * s.m.view(rows).to(delta_q.dtype)
        return mod.base(x) + (delta_d + delta_q).to(x.dtype)


def masked_probe_gradients(lora, seqs, zones: list[str] | None, batch_size: int, fast: bool) -> dict[str, torch.Tensor]:
    """Each row's gradient of its own mean completion NLL (temperature 1, as features.probe_gradients)
    with respect to its deployed-bottleneck gate c, in the current model under the row's zone mask
    (zones None: no mask, both blocks in the forward and nothing detached): {module: [N, r]}."""
    device = lora.device
    engine = fastgen.select(lora.model, fast) is fastgen.FAST
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in lora.modules}
    for start in range(0, len(seqs), batch_size):
        b = seqs.rows(slice(start, start + batch_size)).to(device)
        z = zones[start:start + len(b)] if zones is not None else None
        m = torch.tensor([ad.ZONE_MASKS[zz][0] for zz in z], device=device) if z else None
        d = torch.tensor([ad.ZONE_MASKS[zz][1] for zz in z], device=device) if z else None
        gates = {name: torch.ones(len(b), lora.r, device=device, requires_grad=True) for name in lora.modules}
        with torch.enable_grad(), lora.state.scope(variant=MaskedProbe, probe=gates, probe_live=True, m=m, d=d):
            if engine:
                logp, mask = logprob.token_logprobs(lora.model, b, fused_adapter=False, one_pass=True)
            else:
                logp, mask = logprob.reference_token_logprobs(lora.model, b)
            nll = -(logp * mask).sum(1) / mask.sum(1).clamp(min=1)
            grads = torch.autograd.grad(nll.sum(), list(gates.values()), allow_unused=True)
        for (name, gate), g in zip(gates.items(), grads):
            parts[name].append((torch.zeros_like(gate) if g is None else g).detach().float().cpu())
    return {name: torch.cat(p) for name, p in parts.items()}


def sample_cos(cfg, lora, seqs, masks: list[str]) -> tuple[dict[str, list[float | None]], dict[str, float | None]]:
    """Seed 004's per-sample cosines (R2, R3), read before the step's update, in the model it updates.
    A row's deployed-block gradient is the gradient of its own mean completion NLL (as the seed's probe
    took it: an advantage of 0 would null a GRPO gradient) with respect to its gate on the deployed
    bottleneck (`masked_probe_gradients`), the space v_grad lives in:
      cos_before: its cosine to v_grad with no mask (both blocks in the forward, nothing detached);
      cos_after:  with the row's training mask (hooks.masks: keep, absorb or route), the gradient the
                  row actually sends into the deployed block. A routed row sends none (its deployed
                  output is detached): its gradient is exactly 0 and its cos_after None, like any
                  zero gradient's (R2 counts the rows with a value).
    R3 ("cos_out < cos_in", seed 004) is a statement about the step's gradient, which its projection
    edited: here the sum over the step's rows (student and teacher) of those gradients, whose cosine
    to v_grad before (cos_before_step) and after (cos_after_step) the masks is the step's. Routing
    removes the routed rows' terms, so R3 holds on a step where the rows routed away pointed along
    v_grad more than the rest; a mask that leaves a routed row's gradient in (or a gate that routes
    rows pointing away from v_grad) makes it fail. Cosines over the modules concatenated
    (directions.cosine); v_grad the seed's full direction (v_grad.safetensors) in every arm.
    Returns (per row: cos_before, cos_after; the step: cos_before_step, cos_after_step)."""
    v_grad = directions.load_direction(Path(cfg.vact_dir) / "v_grad.safetensors")
    out, step = {}, {}
    for key, zones in (("before", None), ("after", list(masks))):
        g = masked_probe_gradients(lora, seqs, zones, cfg.t.old_rows, cfg.fast)
        norm = sum(t.pow(2).sum(-1) for t in g.values()).sqrt()
        out[f"cos_{key}"] = [float(c) if n > 0 else None for c, n in zip(directions.cosine(g, v_grad), norm)]
        total = {name: t.double().sum(0, keepdim=True) for name, t in g.items()}
        nonzero = any(bool(t.abs().sum() > 0) for t in total.values())
        step[f"cos_{key}_step"] = float(directions.cosine(total, v_grad)[0]) if nonzero else None
    return out, step


def _log_rollouts(out: Path, step: int, rollouts, scores, zones, acts, rewards, adv, cos=None) -> None:
    """Measurement log for A7 (labels used only after training): one row per rollout (the grader's
    reward, the reward it trained on and its advantage), and the gate's features so null directions
    can be scored on the same rollouts; with train.sample_cos each row's cos_before and cos_after
    (`sample_cos`)."""
    for i, (r, s, z, tr, a) in enumerate(zip(rollouts, scores.tolist(), zones, rewards.tolist(), adv.tolist())):
        append_jsonl(out / "rollouts.jsonl", {
            "step": step, "problem_id": r.problem.id, "mode": r.problem.mode, "source": r.source,
            "deploy_sampled": r.deploy, "score": s, "zone": z, "reward": r.reward, "train_reward": tr,
            "advantage": a, "gt_pass": r.gt_pass, "hacked": r.hacked, "completion": r.text,
            **({k: v[i] for k, v in cos.items()} if cos else {})})
    with atomic_path(out / "acts" / f"step_{step:05d}.safetensors") as tmp:
        save_file({m: a.contiguous() for m, a in acts.items()}, str(tmp))


def _merge_acts(out: Path) -> None:
    files = sorted((out / "acts").glob("step_*.safetensors"))
    parts = [load_file(str(f)) for f in files]
    merged = {m: torch.cat([p[m] for p in parts]) for m in parts[0]} if parts else {}
    with atomic_path(out / "rollout_acts.safetensors") as tmp:
        save_file(merged, str(tmp))


def _digest(path) -> str | None:
    return sha256_file(path) if path is not None and Path(path).exists() else None


def code_digest() -> str:
    """sha256 over the sources a training run executes (vgrout.io.code_files of this module: its
    transitive vgrout imports, names and bytes), so editing a benchmark or the analysis does not
    restart a resumable run, and editing anything train runs does."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]
    for f in code_files(__name__):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _system_prompt(problems: list[Problem]) -> str | None:
    first = problems[0].messages[0]
    return first["content"] if first["role"] == "system" else None


def _tuplify(x):
    return tuple(_tuplify(i) for i in x) if isinstance(x, list) else x
