"""The captured decode step per layout: lanes on the prompt slots' grid (U' slots × R' rows) against
the same lanes packed densely into a larger slot layout (`decode.Lanes`), and the grid each packed
layout replaces, at two attended spans. Prints one json line per layout.

    python bench/try_packed_lanes.py --batch 256 --group 16 --new-tokens 1536
"""
from __future__ import annotations

import json

import torch

from profile_decode import adapted_model, experiment_args, make_engine, step_ms  # noqa: E402 (this folder is on the path: the script's own)

# (U', R', lanes): a grid (lanes = U'·R') or lanes packed into it
LAYOUTS = [(16, 16, 256), (16, 16, 192), (16, 12, 192), (16, 12, 128), (16, 8, 128), (16, 8, 96),
           (16, 6, 96), (16, 6, 64), (16, 4, 64), (16, 3, 48), (16, 3, 24), (12, 3, 24), (8, 1, 8), (6, 1, 6)]


def set_layout(eng, U: int, R: int, lanes: int) -> None:
    """Lanes 0..lanes-1 spread over U slots as evenly as R allows; a spare query row repeats its
    slot's first lane (what `Engine.compact` writes)."""
    per = [R] * U if lanes == U * R else [lanes // U + (u < lanes % U) for u in range(U)]
    slot, r, qrow, first = [], [], [], 0
    for u, c in enumerate(per):
        slot += [u] * c
        r += range(c)
        qrow += [first + i for i in range(c)] + [first if c else 0] * (R - c)
        first += c
    eng.place(U, R, slot, r, qrow)


def main() -> None:
    args = experiment_args(256, 16, 1536)
    model, lora, prompts = adapted_model(args)
    eng = make_engine(model, lora, prompts, args.group, args.new_tokens)
    for span in (args.span, 3 * args.span):
        for U, R, n in LAYOUTS:
            set_layout(eng, U, R, n)
            print(json.dumps({"span": span, "slots": U, "rows": R, "lanes": n, "packed": eng.packed,
                              "step_ms": round(step_ms(eng, span), 3)}), flush=True)


if __name__ == "__main__":
    main()
