"""Round 2's probe of round 1's mix-0 NaN: runs `stages/train.py none 0` in the current workspace with
checks around the loss: non-finite values of logπ, logπ_sample and the advantages, on and off the
completion mask, per micro-batch and row; each adapter parameter's gradient as it arrives in the
backward; with --anomaly also torch's anomaly mode (the op whose backward made the first NaN).
  python nan_probe.py [--anomaly]"""
import runpy
import sys

import torch

from vgrout.train import grpo, loop

if "--anomaly" in sys.argv:
    torch.autograd.set_detect_anomaly(True, check_nan=True)
mb = [0]
_surrogate, _build = grpo.bounded_surrogate, loop.build_student


def rows(x):
    return sorted(set(x.nonzero()[:, 0].tolist()))


def probe(logp, prox, behav, adv, mask, *a):
    mb[0] += 1
    on = mask > 0
    print(f"mb {mb[0]}: {tuple(logp.shape)}, completion tokens per row {on.sum(1).tolist()}", flush=True)
    for name, t in (("logp", logp.detach()), ("behav", behav.detach())):
        bad = ~torch.isfinite(t)
        if bad.any():
            print(f"  NONFINITE {name}: on-mask rows {rows(bad & on)}, off-mask rows {rows(bad & ~on)}; "
                  f"min on mask {t[on].min().item():.3g}", flush=True)
        else:
            print(f"  {name} finite: min on mask {t[on].min().item():.3g}, max {t[on].max().item():.3g}", flush=True)
    if not torch.isfinite(adv).all():
        print(f"  NONFINITE adv: {(~torch.isfinite(adv)).nonzero().flatten().tolist()}", flush=True)
    obj, st = _surrogate(logp, prox, behav, adv, mask, *a)
    if not torch.isfinite(obj).all():
        print(f"  NONFINITE obj rows {rows(~torch.isfinite(obj))}", flush=True)
    return obj, st


def build(cfg):
    lora, tok = _build(cfg)
    for n, p in enumerate(lora.parameters()):
        if p.requires_grad:
            p.register_hook(lambda g, n=n: print(f"  NONFINITE grad {n} (mb {mb[0]})", flush=True)
                            if not torch.isfinite(g).all() else None)
    return lora, tok


grpo.bounded_surrogate, loop.build_student = probe, build
sys.argv = ["stages/train.py", "none", "0"]
runpy.run_path("stages/train.py", run_name="__main__")
