import glob, math, os, torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend as B
print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), torch.cuda.get_device_name(), flush=True)
dev = 'cuda'
BACKENDS = {'default': None, 'cudnn': [B.CUDNN_ATTENTION], 'efficient': [B.EFFICIENT_ATTENTION], 'math': [B.MATH],
            'fix(no cudnn)': [B.FLASH_ATTENTION, B.EFFICIENT_ATTENTION, B.MATH]}

def run(q, k, v, mask, scale, do, which):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    ctx = sdpa_kernel(BACKENDS[which]) if BACKENDS[which] else torch.enable_grad()
    try:
        with ctx:
            G = q.shape[1] // k.shape[1]
            o = F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1), attn_mask=mask, scale=scale)
            o.backward(do)
    except RuntimeError as e:
        return None, str(e).splitlines()[0][:100]
    return (o.detach(), q.grad, k.grad, v.grad), None

def bad(t): return int((~torch.isfinite(t)).sum())

# 1. the upstream repro (pytorch#196678) on this machine, L % 128 == 64 vs others
for L in (447, 448, 449, 704, 768):
    torch.manual_seed(0); D = 64
    q = torch.randn(1, 1, L, D, device=dev, dtype=torch.bfloat16) * 0.1
    k = torch.randn(1, 1, L, D, device=dev, dtype=torch.bfloat16) * 0.1
    v = torch.randn(1, 1, L, D, device=dev, dtype=torch.bfloat16)
    q[..., 0], k[..., 0] = 1.0, -120 * math.sqrt(D)
    mask = torch.ones(L, L, dtype=torch.bool, device=dev).tril()[None, None]
    do = torch.randn(1, 1, L, D, device=dev, dtype=torch.bfloat16)
    line = []
    for w in ('default', 'efficient'):
        r, err = run(q, k, v, mask, None, do, w)
        line.append(f'{w}: ' + (err if r is None else f'dq {bad(r[1])} dk {bad(r[2])} dv {bad(r[3])}'))
    print(f'synthetic L={L} ({L % 128}):', ' | '.join(line), flush=True)

# 2. the real layer-8 prompt-pass q/k/v of the failing micro-batch (CPU, base adapter), as _attend calls SDPA
for f in sorted(glob.glob('.devcarry/nanprobe/L*.pt')):
    d = torch.load(f)
    q, k, v = (d[x].to(dev, torch.bfloat16) for x in 'qkv')
    allowed, pad = d['allowed'].to(dev), d['padpos'].to(dev)  # pad [2, Tp]
    torch.manual_seed(1)
    do = torch.randn_like(q) * (~pad)[:, None, :, None]  # no gradient reaches a pad position's output
    ref, _ = run(q.double(), k.double(), v.double(), allowed[:, None], d['scale'], do.double(), 'math')
    for Tp in (q.shape[2], q.shape[2] - 1):  # the real shape, and one column of padding less
        sl = slice(q.shape[2] - Tp, None)
        for w in BACKENDS:
            r, err = run(q[:, :, sl], k[:, :, sl], v[:, :, sl], allowed[:, None, sl, sl], d['scale'], do[:, :, sl], w)
            if r is None:
                print(f'{f} Tp={Tp} {w}: {err}'); continue
            msg = f'{os.path.basename(f)} Tp={Tp} ({Tp % 128}) {w:14s}: out {bad(r[0])} dq {bad(r[1])} dk {bad(r[2])} dv {bad(r[3])}'
            if bad(r[1]):
                nz = (~torch.isfinite(r[1])).any(-1).nonzero()  # [b, h, t]
                padrow = pad[:, sl][nz[:, 0], nz[:, 2]]
                msg += f' | nonfinite dq rows: heads {sorted(set(nz[:, 1].tolist()))}, pad rows {int(padrow.sum())}, real rows {int((~padrow).sum())}'
            elif Tp == q.shape[2]:
                err = max(((a.double() - b) .abs().max() / b.abs().max()).item() for a, b in zip(r[1:], ref[1:]))
                msg += f' | max rel err of dq,dk,dv vs fp64 math {err:.2e}'
            print(msg, flush=True)

# 3. the project's own _attend, as it is (vgrout.engine.logprob) and with the fix (logprob_fixed.py beside this file)
import importlib.util
from vgrout.engine import logprob as orig
spec = importlib.util.spec_from_file_location('logprob_fixed', '.devcarry/nanprobe/logprob_fixed.py')
fixed = importlib.util.module_from_spec(spec); spec.loader.exec_module(fixed)
for f in sorted(glob.glob('.devcarry/nanprobe/L*.pt')):
    d = torch.load(f)
    allowed, pad = d['allowed'].to(dev), d['padpos'].to(dev)
    for name, mod in (('vgrout _attend', orig), ('fixed _attend', fixed)):
        q, k, v = (d[x].to(dev, torch.bfloat16).requires_grad_() for x in 'qkv')
        torch.manual_seed(1)
        o = mod._attend(q, k, v, allowed, d['scale'])
        o.backward(torch.randn_like(o) * (~pad)[:, None, :, None])
        print(f'{os.path.basename(f)} {name}: out {bad(o)} dq {bad(q.grad)} dk {bad(k.grad)} dv {bad(v.grad)}', flush=True)
