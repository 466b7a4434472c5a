"""How one decode step's time splits: the captured step's time (graph replay) at each span, and
one eager step's kernels, by torch.profiler, summed by kind (the attention's kernels, the
rotation's, GEMMs, norms, the rest), with the GEMMs by operand shape. The replay's time less the
kernels' sum is what the device spends between kernels. The engine at `paper`'s shape by default.

    python -m bench.decode_split --spans 256,768,1536
    python -m bench.decode_split --batch 64 --group 8 --prompt-len 300 --new-tokens 256 --r 16 --spans 256
    python -m bench.decode_split --batch 64 --group 8 --prompt-len 300 --new-tokens 256 --r 16 --spans 256 --programs 512,1024
"""
from __future__ import annotations

import json
from collections import defaultdict

import torch
from profile_decode import adapted_model, make_engine, shape_args, timed  # noqa: E402 (this folder is on the path: the script's own)
from torch.profiler import ProfilerActivity, profile

from vgrout.engine import flashdecode

# _split_kernel: the attention kernel of trees before 16a63fb, for runs of this script there
KINDS = [("attention", ("_prompt_kernel", "_own_kernel", "_merge_kernel", "_split_kernel")), ("rotation", ("_rotate_kernel",)),
         ("gemm", ("nvjet", "gemm", "splitKreduce", "cutlass", "xmma")), ("norm", ("layer_norm", "rms_norm"))]


def kind(name: str) -> str:
    return next((k for k, keys in KINDS if any(s in name for s in keys)), "other")


def device_us(e) -> float:
    return getattr(e, "self_device_time_total", None) or e.self_cuda_time_total


def main() -> None:
    ap = shape_args(256, 16, 1536)
    ap.add_argument("--spans", default="256,768,1536")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--prompt-programs", default=str(flashdecode.PROMPT_PROGRAMS),
                    help="flashdecode.PROMPT_PROGRAMS values to time the replay at, in turn")
    ap.add_argument("--prompt-warps", default=str(flashdecode.PROMPT_WARPS),
                    help="flashdecode.PROMPT_WARPS values, each with every PROMPT_PROGRAMS value (the profile: at the defaults)")
    ap.add_argument("--programs", default=str(flashdecode.PROGRAMS),
                    help="flashdecode.PROGRAMS values (the own keys' split), each with every prompt setting above")
    args = ap.parse_args()
    model, lora, prompts = adapted_model(args)
    eng = make_engine(model, lora, prompts, args.group, args.new_tokens)
    defaults = flashdecode.PROMPT_PROGRAMS, flashdecode.PROMPT_WARPS, flashdecode.PROGRAMS
    out = []

    def replay_ms(span: int, start: int, prompt_programs: int, warps: int, programs: int) -> float:
        flashdecode.PROMPT_PROGRAMS, flashdecode.PROMPT_WARPS, flashdecode.PROGRAMS = prompt_programs, warps, programs
        eng.graphs.clear()  # the graphs hold the kernels' grid: recaptured, into a fresh pool
        eng.pool = torch.cuda.graph_pool_handle()
        eng.slot.fill_(start)
        return timed(lambda: eng.replay(span))

    for span in map(int, args.spans.split(",")):
        start = span - 40  # the written slot near the span's end; 33 replays below stay inside it
        for op in map(int, args.programs.split(",")):
            for pw in map(int, args.prompt_warps.split(",")):
                for pp in map(int, args.prompt_programs.split(",")):
                    print(json.dumps({"span": span, "programs": op, "prompt_programs": pp, "prompt_warps": pw,
                                      "replay_ms": round(replay_ms(span, start, pp, pw, op), 3)}))
        step_ms = replay_ms(span, start, *defaults)  # the profile and its row: at the defaults
        eng.slot.fill_(start)
        eng.decode_step(span)  # lazy set-up outside the profile
        eng.slot.fill_(start)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            eng.decode_step(span)
            torch.cuda.synchronize()
        by_kind, count = defaultdict(float), defaultdict(int)
        kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
        for e in kernels:
            by_kind[kind(e.key)] += device_us(e) / 1e3
            count[kind(e.key)] += e.count
        total = sum(by_kind.values())
        row = {"lanes": eng.lanes, "span": span, "written": start, "prompt_programs": defaults[0],
               "prompt_warps": defaults[1], "programs": defaults[2], "replay_ms": round(step_ms, 3),
               "kernel_sum_ms": round(total, 3), "between_kernels_ms": round(step_ms - total, 3),
               "kernels": sum(count.values()), "ms_by_kind": {k: round(v, 3) for k, v in by_kind.items()},
               "count_by_kind": dict(count)}
        out.append(row)
        print(json.dumps(row), flush=True)
        print(f"-- span {span}: kernels by time")
        for e in sorted(kernels, key=lambda e: -device_us(e))[:args.top]:
            print(f"{device_us(e) / 1e3:8.3f} ms {e.count:5d}  {kind(e.key):9s} {e.key[:90]}")
        print(f"-- span {span}: matrix products by operand shape (device time, calls)")
        ops = [e for e in prof.key_averages(group_by_input_shape=True)
               if e.key in ("aten::mm", "aten::addmm", "aten::addmm_", "aten::linear", "aten::matmul")]
        for e in sorted(ops, key=lambda e: -e.device_time_total)[:args.top]:
            print(f"{e.device_time_total / 1e3:8.3f} ms {e.count:5d}  {e.key:13s} {e.input_shapes}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
