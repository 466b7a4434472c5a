"""One run of the collapse diagnosis, read after training (labels are measurement here, never routing):
  - per third of the run, each zone's student rows and the teacher rows: count, mean reward, mean
    Dr.GRPO advantage (reward − the group's baseline, as train.baseline takes it; a group is a step's
    G rollouts of one problem), and the share hacked and passing; teacher rows in all and per zone;
  - the eval curve of both views and the final adapter's rates;
  - the final adapter's completions on the first test problems, deployed view (quarantine ablated)
    and train view, sampled as the eval samples them (needs the adapter: skipped with --no-model).
Run in the run's workspace: python probe.py VARIANT RUN [--no-model] > probe.json"""
import json
import sys
from collections import defaultdict
from pathlib import Path


def advantage_table(rollouts: Path, G: int, steps: int, baseline: str = "group") -> dict:
    import torch

    from vgrout.train import grpo

    rows = [json.loads(line) for line in open(rollouts)]
    for step in sorted({r["step"] for r in rows}):  # a step's rollouts are logged group after group
        at = [r for r in rows if r["step"] == step]
        assert all(len({r["problem_id"] for r in at[i:i + G]}) == 1 for i in range(0, len(at), G)), \
            "a group is not G rollouts of one problem"
        on = torch.tensor([r["source"] == "student" for r in at]) if baseline == "students" else None
        for r, a in zip(at, grpo.advantages(torch.tensor([r["reward"] for r in at]), G, on).tolist()):
            r["adv"] = a
    third, table = steps // 3, {}
    for lo in range(0, steps, third):
        cells = defaultdict(list)
        for r in rows:
            if lo <= r["step"] < lo + third:
                cells[f"{r['source']}_{r['zone']}"].append(r)
                if r["source"] != "student":
                    cells[r["source"]].append(r)
        table[f"steps_{lo}-{lo + third - 1}"] = {
            k: {"n": len(v), "reward": round(sum(r["reward"] for r in v) / len(v), 3),
                "adv": round(sum(r["adv"] for r in v) / len(v), 3),
                "hacked": round(sum(bool(r["hacked"]) for r in v) / len(v), 3),
                "gt_pass": round(sum(bool(r["gt_pass"]) for r in v) / len(v), 3)} for k, v in sorted(cells.items())}
    return table


def overall(rows: list[dict]) -> list[dict]:
    return [{k: r[k] for k in ("step", "view", "n", "solve", "hack") if k in r} for r in rows if r["mode"] == "overall"]


def completions(layout, params, run: str, n_problems: int = 6) -> dict:
    import torch

    from vgrout.engine import adapter as ad
    from vgrout.engine import fastgen
    from vgrout.engine.model import chat_prompt, load
    from vgrout.substrate.problems import load_problems

    model, tok = load(str(layout.model))
    problems = load_problems(layout.test_problems)[:n_problems]
    final = layout.run(run) / "adapter.safetensors"
    cfg = ad.config_of(final)
    lora = ad.attach(model, r=cfg["r"], init_scale=cfg["init_scale"], seed=cfg["seed"], targets=cfg["targets"],
                     last_layers=cfg.get("last_layers"))
    texts = {}
    for view in ("deploy", "train"):
        lora.load(final)
        if view == "deploy":
            lora.ablate_quarantine()
        torch.manual_seed(params.eval.seed)
        backend = fastgen.select(model, params.fast)
        ids = backend.generate(model, tok, [chat_prompt(tok, p.messages) for p in problems], params.eval.max_new_tokens,
                               params.eval.temperature, batch_size=len(problems), lora=lora)
        backend.release()
        texts[view] = [{"problem": p.id, "mode": p.mode, "n_tokens": len(row), "text": t[:400]}
                       for p, row, t in zip(problems, ids, tok.batch_decode(ids, skip_special_tokens=True))]
    return texts


if __name__ == "__main__":
    from vgrout import config
    from vgrout.layout import Layout

    variant, run = sys.argv[1], sys.argv[2]
    layout, params = Layout(), config.load("params.yaml")
    out = {"variant": variant, "run": run, "params_train": params.train.model_dump(),
           "gate_teacher_zone": params.gate.teacher_zone,
           "thirds": advantage_table(layout.run(run) / "rollouts.jsonl", params.train.group_size, params.train.steps,
                                     params.train.baseline),
           "curve": overall(json.load(open(layout.run_metrics(run) / "eval_curve.json"))["rows"]),
           "final": overall(json.load(open(layout.run_metrics(run) / "per_mode_deploy.json"))["rows"])}
    if "--no-model" not in sys.argv:
        out["completions"] = completions(layout, params, run)
    json.dump(out, sys.stdout, indent=1)
