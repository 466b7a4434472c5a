"""The lora2r adapter: one rank-2r LoRA per target Linear, split into a deployed block and a
quarantine block, with per-rollout keep / absorb / route masks.

Per target Linear W (d_out x d_in), trainable A:[2r, d_in] and B:[d_out, 2r], both Gaussian;
frozen copies A0, B0 of their init are subtracted so the net delta is exactly zero at init:

    delta(x) = B·A·x − B0·A0·x = delta_deployed(x) + delta_quarantine(x)
    delta_deployed   uses rows/cols [:r]   (kept at deployment)
    delta_quarantine uses rows/cols [r:]   (deleted at deployment: reset to its init, delta = 0)

Per-rollout masks, set before the single grad-carrying forward (SGTM Table 1):
    keep   (m=0, d=0): quarantine zeroed in the forward; only the deployed block trains.
    absorb (m=1, d=0): both blocks in the forward; both train.
    route  (m=1, d=1): both in the forward, deployed output detached; only quarantine trains.

    y = W·x + (detach(delta_deployed) if d else delta_deployed) + m · delta_quarantine

The gate reads h = A_deployed·x (the deployed-block bottleneck), pooled over completion
tokens; `Lora2r.capture` collects it during the no-grad sampling-mode log-prob forward.

The masks, the pooling and the variant that computes the delta live in one `RoutingState` shared
by the model's wrapped Linears: ExactDelta (fp32, the default) or FusedDelta (`Lora2rDelta`: the
base product and the delta's two matmuls in the input's dtype; `Lora2r.fused`). The fast log-prob
forwards select it there.
"""
from __future__ import annotations

import contextlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch.optim.optimizer import register_optimizer_step_post_hook

from vgrout.io import InputError, atomic_path

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ZONES = ("keep", "absorb", "route")
# zone -> (m: quarantine in the forward, d: deployed output detached)
ZONE_MASKS = {"keep": (0.0, False), "absorb": (1.0, False), "route": (1.0, True)}

# Every optimizer step anywhere, counted: a fused optimizer (AdamW(fused=True)) writes the
# parameters without bumping their version, so `Lora2rLinear.stacked` keys on this too.
_optimizer_steps = 0


def _count_optimizer_step(optimizer, args, kwargs) -> None:
    global _optimizer_steps
    _optimizer_steps += 1


register_optimizer_step_post_hook(_count_optimizer_step)


class Lora2rVariant:
    """How a Lora2rLinear computes its output under the routing masks, in the spirit of PEFT's LoRA
    layer variants: the module holds the weights and the shared `RoutingState`, and the state names
    the variant every forward dispatches to. Same function, same masks, other kernels."""

    @staticmethod
    def forward(mod: "Lora2rLinear", x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class ExactDelta(Lora2rVariant):
    """The deltas in fp32 (the reference: any base dtype, the adapter's own precision)."""

    @staticmethod
    def forward(mod: "Lora2rLinear", x: torch.Tensor) -> torch.Tensor:
        y = mod.base(x)
        delta_d, delta_q, h_d = mod.deltas(x)
        s = mod.state
        if s.pool_weights is not None:
            w = s.pool_weights.to(h_d.dtype)
            s.pooled[mod.name] = torch.einsum("bt,btr->br", w, h_d.detach())
        if s.d is not None:
            delta_d = torch.where(s.d.view(-1, *[1] * (x.dim() - 1)), delta_d.detach(), delta_d)
        if s.m is not None:
            delta_q = delta_q * s.m.view(-1, *[1] * (x.dim() - 1)).to(delta_q.dtype)
        return y + (delta_d + delta_q).to(y.dtype)


class FusedDelta(Lora2rVariant):
    """The base product and the delta from `Lora2rDelta`: matmuls in x's dtype (bf16 on a GPU)
    with fp32 accumulation, like a standard bf16 LoRA, the delta added inside the GEMMs. The base
    Linear's weight and bias are read, its forward is not called. The pooled bottleneck
    activations (the gate's input) stay fp32: mean_t(w_t·A_d·x_t) = A_d·(Σ_t w_t·x_t)."""

    @staticmethod
    def forward(mod: "Lora2rLinear", x: torch.Tensor) -> torch.Tensor:
        st = mod.state
        if st.pool_weights is not None:
            xp = torch.einsum("bt,bti->bi", st.pool_weights.float(), x.float())
            st.pooled[mod.name] = F.linear(xp, mod.A[:mod.r].detach())
        if type(mod.base) is not nn.Linear:  # a subclass's own forward would be skipped, not run
            raise ValueError(f"FusedDelta: {mod.name}'s base is a {type(mod.base).__name__}, not an nn.Linear; "
                             "Lora2rDelta computes an nn.Linear's product in its place")
        Ac, Bc = mod.stacked(x.dtype)
        S, S_grad, keep = st.row_scales(x, mod.r)
        W, bias = mod.base.weight, mod.base.bias
        if torch.is_grad_enabled():
            if W.requires_grad or (bias is not None and bias.requires_grad):
                raise ValueError(f"FusedDelta: {mod.name}'s base weight or bias requires grad; lora2r trains its adapter alone "
                                 "(Lora2rDelta returns no gradient for the base)")
            return Lora2rDelta.apply(x, W, bias, mod.A, mod.B, Ac, Bc, S, S_grad, keep)
        return _delta(x, W, bias, Ac, Bc, S)[0]  # no graph to record: the autograd Function's host time saved


class FrozenReader(Lora2rVariant):
    """The gate's scorer: the base model's output (no adapter delta at all) and the pooled
    A0_d·x, the deployed block's bottleneck at its init. This is the feature space v_act is
    fitted in (the adapter at init adds exactly zero), and no update moves it: the same text
    gets the same score at every step, so routed mass can move only with what is written."""

    @staticmethod
    def forward(mod: "Lora2rLinear", x: torch.Tensor) -> torch.Tensor:
        s = mod.state
        if s.pool_weights is not None:
            # the op v_act's extraction at init runs (h = x·Aᵀ with A = A0), on the frozen copy
            h0 = F.linear(x.to(mod.A0.dtype), mod.A0)[..., :mod.r]
            s.pooled[mod.name] = torch.einsum("bt,btr->br", s.pool_weights.to(h0.dtype), h0)
        return mod.base(x)


class ProbeReader(FrozenReader):
    """routeV's per-rollout identity probe: a gate c (one per row, of size r, at 1) multiplies the
    deployed bottleneck, so the forward is the frozen scorer's (the base model; c − 1 = 0 adds an exact
    zero) or, with `RoutingState.probe_live`, the current deployed model with the quarantine ablated;
    ∂NLL_row/∂c_row is the row's gradient in bottleneck space:
        frozen: y = W·x + B0_d·((c − 1) ⊙ A0_d·x)
        live:   y = W·x + B_d·(c ⊙ A_d·x) − B0_d·A0_d·x
    Rows never mix: each row's c scales only that row's activations."""

    @staticmethod
    def forward(mod: "Lora2rLinear", x: torch.Tensor) -> torch.Tensor:
        s, r = mod.state, mod.r
        y = mod.base(x)
        c = s.probe[mod.name].view(-1, *[1] * (x.dim() - 2), r)
        xf = x.to(mod.A0.dtype)
        A, B = (mod.A.detach(), mod.B.detach()) if s.probe_live else (mod.A0, mod.B0)
        h = F.linear(xf, A[:r])
        delta = F.linear(h * (c - 1), B[:, :r])
        if s.probe_live:  # the deployed delta the probe sits in (quarantine ablated: no m·delta_q)
            delta = delta + F.linear(h, B[:, :r]) - F.linear(F.linear(xf, mod.A0[:r]), mod.B0[:, :r])
        return y + delta.to(y.dtype)


class Lora2rDelta(torch.autograd.Function):
    """W·x (+ bias) + the lora2r delta of `Lora2rLinear` with its keep/absorb/route semantics: the
    base product and two matmuls in x's dtype (fp32 accumulation) with a hand-written backward.
    The base product is this Function's own, so each sum accumulates inside a GEMM (β = 1): the
    delta's second product adds into the base output in place, and the backward's input gradient
    g·W takes the adapter's gH·Ac in the same way. As a base Linear and a delta added after it,
    the forward copied the base output (an out-of-place addmm) and autograd added the two input
    gradients in a kernel of their own: one pass over [tokens, d_out] and one over [tokens, d_in]
    per module (docs/performance.md has the before and after). B·A − B0·A0 is a difference of
    nearly equal terms, so it is regrouped before rounding to bf16 (the differences are formed
    in fp32, exactly zero at init and after ablation; `Lora2rLinear.stacked`):

        B·A·x − B0·A0·x = (B − B0)·(A·x) + B0·((A − A0)·x)       per block
        H = x·Acᵀ, Ac = [A_d; A_d−A0_d; A_q; A_q−A0_q],  delta = (H ⊙ S)·Bcᵀ, Bc = [B_d−B0_d, B0_d, B_q−B0_q, B0_q],
        S = (1, 1, m, m)

    Backward: the deployed columns see the gradient only on rows whose deployed output is not
    detached (keep_d = 1 − d), the quarantine columns see it scaled by m; A0, B0 get none, and
    neither do W and its bias (frozen: `FusedDelta` checks)."""

    @staticmethod
    def forward(ctx, x, W, bias, A, B, Ac, Bc, S, S_grad, keep):
        out, HS = _delta(x, W, bias, Ac, Bc, S)
        ctx.save_for_backward(x, W, HS, S_grad, keep, Ac, Bc)
        ctx.r, ctx.dtypes = A.shape[0] // 2, (A.dtype, B.dtype)
        return out

    @staticmethod
    def backward(ctx, g):
        x, W, HS, S_grad, keep, Ac, Bc = ctx.saved_tensors
        r = ctx.r
        # deployed columns: detached rows get no gradient. A row factor commutes with the
        # matmuls, so it scales the rank-sized tensors, never the [tokens, d_out] gradient,
        # and each product below reads g once.
        gH = F.linear(g, Bc.t()) * S_grad
        x2, g2, gH2 = x.flatten(0, -2), g.flatten(0, -2), gH.flatten(0, -2)
        # B enters as B − B0 against A·x; A enters twice, as A·x and as (A − A0)·x
        grad_B = g2.t() @ torch.cat([HS[..., :r] * keep, HS[..., 2 * r:3 * r]], -1).flatten(0, -2)
        grad_A = gH2.view(-1, 2, 2, r).sum(2).flatten(1).t() @ x2  # per block: A·x and (A − A0)·x
        grad_x = (g2 @ W).addmm_(gH2, Ac).view_as(x) if ctx.needs_input_grad[0] else None
        return grad_x, None, None, grad_A.to(ctx.dtypes[0]), grad_B.to(ctx.dtypes[1]), None, None, None, None, None


def _delta(x, W, bias, Ac, Bc, S) -> tuple[torch.Tensor, torch.Tensor]:
    """(W·x + bias + (H ⊙ S)·Bcᵀ, H ⊙ S) with H = x·Acᵀ: the second product adds into the
    base output in its epilogue."""
    HS = F.linear(x, Ac) * S
    y = F.linear(x, W, bias)
    y.view(-1, y.shape[-1]).addmm_(HS.flatten(0, -2), Bc.t())
    return y, HS


@dataclass
class RoutingState:
    """Shared by every wrapped Linear of one model: the masks of the batch in flight, and the
    variant the wrapped Linears compute with."""
    m: torch.Tensor | None = None          # [batch] float, 1 = quarantine in the forward
    d: torch.Tensor | None = None          # [batch] bool, True = deployed output detached
    pool_weights: torch.Tensor | None = None  # [batch, time] weights over completion tokens
    pooled: dict[str, torch.Tensor] = field(default_factory=dict)  # module name -> [batch, r]
    variant: type[Lora2rVariant] = ExactDelta
    probe: dict[str, torch.Tensor] | None = None  # ProbeReader's gates: module name -> [batch, r], at 1
    probe_live: bool = False  # ProbeReader in the current deployed model, else in the frozen scorer's
    _row_scales: dict = field(default_factory=dict, repr=False)  # row_scales' kept factors

    @contextlib.contextmanager
    def scope(self, **fields) -> Iterator[None]:
        """Set some of m, d, pool_weights, variant for the forwards inside the block; restored after."""
        old = {k: getattr(self, k) for k in fields}
        for k, v in fields.items():
            setattr(self, k, v)
        try:
            yield
        finally:
            for k, v in old.items():
                setattr(self, k, v)

    def row_scales(self, x: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`Lora2rDelta`'s per-row factors for inputs shaped like x [rows, ..., d_in] (1 at every
        row without masks), in x's dtype, broadcasting over x's middle dimensions: S [rows, .., 4r]
        = (1, 1, m, m) on [A_d; A_d − A0_d; A_q; A_q − A0_q]; S_grad, the backward's (keep, keep,
        m, m), keep = 1 − d; keep [rows, .., 1]. The same for every wrapped Linear of a forward,
        so built once per masks, dtype and layout and kept while the masks are these tensors, unchanged."""
        layout = (r, x.dtype, x.dim(), x.shape[0], x.device, *(t._version for t in (self.m, self.d) if t is not None))
        key = (id(self.m), id(self.d), layout)
        kept = self._row_scales.get(key)  # (m, d, factors): holding m and d, their ids stay theirs
        if kept is None:
            if len(self._row_scales) >= 8:  # a two-pass forward uses two: its prompts' and its tokens'
                self._row_scales.clear()
            n, rows = x.shape[0], (-1,) + (1,) * (x.dim() - 2)
            m = self.m.float() if self.m is not None else torch.ones(n, device=x.device)
            keep = (~self.d).float() if self.d is not None else torch.ones(n, device=x.device)
            ones = torch.ones_like(m)
            S = torch.stack([ones, ones, m, m], -1).repeat_interleave(r, -1)
            S_grad = torch.stack([keep, keep, m, m], -1).repeat_interleave(r, -1)
            factors = tuple(t.to(x.dtype).view(*rows, t.shape[-1]) for t in (S, S_grad, keep[:, None]))
            kept = self._row_scales[key] = (self.m, self.d, factors)
        return kept[2]

    def at_recompute(self):
        """context_fn for torch.utils.checkpoint: the recompute in the backward runs under the
        masks and variant in force at the forward, whatever they are when backward() is called
        (and pools nothing)."""
        def fn():
            return contextlib.nullcontext(), self.scope(m=self.m, d=self.d, pool_weights=None,
                                                        variant=self.variant)
        return fn


def routing_state(model: nn.Module) -> RoutingState:
    """The lora2r routing state shared by the model's wrapped Linears; without lora2r, a fresh
    one no module reads (setting it changes nothing)."""
    return next((m.state for m in model.modules() if isinstance(m, Lora2rLinear)), RoutingState())


class Lora2rLinear(nn.Module):
    def __init__(self, base: nn.Linear, name: str, r: int, init_scale: float,
                 generator: torch.Generator, state: RoutingState):
        super().__init__()
        self.base, self.name, self.r, self.state = base, name, r, state
        d_out, d_in = base.weight.shape
        # Adapter parameters stay fp32 whatever the base dtype: AdamW on bf16 params loses updates.
        A = torch.randn(2 * r, d_in, generator=generator) * (init_scale / d_in ** 0.5)
        B = torch.randn(d_out, 2 * r, generator=generator) * (init_scale / r ** 0.5)
        device = base.weight.device
        self.A = nn.Parameter(A.to(device))
        self.B = nn.Parameter(B.to(device))
        self.register_buffer("A0", A.clone().to(device))
        self.register_buffer("B0", B.clone().to(device))

    def deltas(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(delta_deployed, delta_quarantine, h_deployed) in fp32."""
        r = self.r
        x = x.to(self.A.dtype)
        h, h0 = F.linear(x, self.A), F.linear(x, self.A0)
        # The same ops on equal inputs give bitwise-equal results, so each delta is exactly
        # zero while a block equals its init (at init, and for the quarantine after ablation).
        delta_d = F.linear(h[..., :r], self.B[:, :r]) - F.linear(h0[..., :r], self.B0[:, :r])
        delta_q = F.linear(h[..., r:], self.B[:, r:]) - F.linear(h0[..., r:], self.B0[:, r:])
        return delta_d, delta_q, h[..., :r]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.state.variant.forward(self, x)

    @torch.no_grad()
    def stacked(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Lora2rDelta's Ac [4r, d_in] and Bc [d_out, 4r] in dtype, kept until A, B, A0 or B0
        changes (an optimizer step, counted by `_optimizer_steps`; a load or an ablation, which
        bump their version): a step's forwards, its recomputes and its micro-batches share one
        copy instead of rebuilding it per call."""
        key = (dtype, _optimizer_steps, *((t._version, t.data_ptr()) for t in (self.A, self.B, self.A0, self.B0)))
        if getattr(self, "_stacked_key", None) != key:
            r, (A, B, A0, B0) = self.r, (self.A, self.B, self.A0, self.B0)
            dA, dB = A - A0, B - B0
            self._stacked = (torch.cat([A[:r], dA[:r], A[r:], dA[r:]]).to(dtype),
                             torch.cat([dB[:, :r], B0[:, :r], dB[:, r:], B0[:, r:]], 1).to(dtype))
            self._stacked_key = key
        return self._stacked

    @torch.no_grad()
    def ablate_quarantine(self) -> None:
        self.A[self.r:] = self.A0[self.r:]
        self.B[:, self.r:] = self.B0[:, self.r:]



@dataclass
class Lora2r:
    """Handle on a model wrapped with lora2r: its modules, shared routing state and config."""
    model: nn.Module
    modules: dict[str, Lora2rLinear]
    state: RoutingState
    config: dict

    @property
    def r(self) -> int:
        return self.config["r"]

    @property
    def device(self) -> torch.device:
        return next(iter(self.modules.values())).A.device

    def parameters(self) -> list[nn.Parameter]:
        return [p for m in self.modules.values() for p in (m.A, m.B)]

    # -- masks ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def masked(self, zones: Sequence[str]) -> Iterator[None]:
        """Per-row keep/absorb/route masks for the forwards inside the block."""
        unknown = set(zones) - set(ZONES)
        if unknown:
            raise ValueError(f"unknown zone(s) {sorted(unknown)}; valid: {ZONES}")
        device = self.device
        m = torch.tensor([ZONE_MASKS[z][0] for z in zones], device=device)
        d = torch.tensor([ZONE_MASKS[z][1] for z in zones], device=device)
        with self.state.scope(m=m, d=d):
            yield

    def sampling(self, deploy_rows: Sequence[bool]) -> contextlib.AbstractContextManager:
        """Sampling mode per row: quarantine off (deploy-sampled) or on (full-sampled).
        Sampling carries no grad, so these are the keep and absorb forwards."""
        return self.masked(["keep" if dep else "absorb" for dep in deploy_rows])

    @contextlib.contextmanager
    def capture(self, pool_weights: torch.Tensor) -> Iterator[dict[str, torch.Tensor]]:
        """Collect pooled deployed-block bottleneck activations {module: [batch, r]}."""
        self.state.pooled = {}
        with self.state.scope(pool_weights=pool_weights):
            yield self.state.pooled

    def frozen(self) -> contextlib.AbstractContextManager:
        """The forwards inside the block read the frozen scorer's features (FrozenReader): the
        base model with the adapter at its init, whatever the adapter has learned since."""
        return self.state.scope(variant=FrozenReader, m=None, d=None)

    def probed(self, gates: dict[str, torch.Tensor], live: bool = False) -> contextlib.AbstractContextManager:
        """The forwards inside the block run ProbeReader with these per-row gates (each [batch, r],
        at 1): the frozen scorer's function (live: the deployed model's), whose gradient with
        respect to a row's gates is that row's gradient in bottleneck space (features.probe_gradients)."""
        return self.state.scope(variant=ProbeReader, probe=gates, probe_live=live, m=None, d=None)

    def fused(self, on: bool = True) -> contextlib.AbstractContextManager:
        """The forwards inside the block compute each wrapped Linear with `Lora2rDelta` in the
        input's dtype, base product and delta (FusedDelta), instead of the delta in fp32 after the
        base Linear (ExactDelta): same masks, other rounding."""
        return self.state.scope(variant=FusedDelta if on else ExactDelta)

    # -- deployment ----------------------------------------------------------------------
    def ablate_quarantine(self) -> None:
        """Deployment ablation: reset the quarantine block to its init, so its delta is zero."""
        for m in self.modules.values():
            m.ablate_quarantine()

    @torch.no_grad()
    def quarantine_at_init(self) -> bool:
        """True when the quarantine block equals its init bit for bit (its delta is exactly zero),
        so the full model and the deployed model are the same function."""
        return all(torch.equal(m.A[m.r:], m.A0[m.r:]) and torch.equal(m.B[:, m.r:], m.B0[:, m.r:])
                   for m in self.modules.values())

    def block_norms(self, grads: bool = False) -> dict[str, float]:
        """L2 norm over all modules of each block's parameters (or of their gradients)."""
        out = {}
        for block in ("deployed", "quarantine"):
            # summed where the tensors are, in module order, and read once: a read per tensor
            # would make the host wait for the GPU a thousand times a step
            sq = torch.zeros((), device=self.device)
            for mod in self.modules.values():
                for t, is_A in ((mod.A, True), (mod.B, False)):
                    t = t.grad if grads else t.detach()
                    if t is not None:
                        sq = sq + _block_slice(t, mod, is_A, block).float().pow(2).sum()
            out[block] = float(sq) ** 0.5
        return out

    @torch.no_grad()
    def clip_grad_norms(self, max_norm: float) -> dict[str, float]:
        """Scale the deployed block's gradient and the quarantine block's gradient, each on its
        own, to an L2 norm (over all modules) of at most max_norm; returns the norms before.
        The blocks are slices of the same A and B, and one global clip lets a large gradient in
        one block scale the other's update down (a deployed norm of 93 shrank the quarantine's
        update 93x). The scale is torch's clip_grad_norm_'s: max_norm / (norm + 1e-6), at most 1."""
        norms = self.block_norms(grads=True)
        for block, norm in norms.items():
            if not math.isfinite(norm):
                raise FloatingPointError(f"the {block} block's gradient norm is {norm}")
            scale = max_norm / (norm + 1e-6)
            if scale >= 1:
                continue
            for mod in self.modules.values():
                for t, is_A in ((mod.A, True), (mod.B, False)):
                    if t.grad is not None:
                        _block_slice(t.grad, mod, is_A, block).mul_(scale)
        return norms

    # -- persistence ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, torch.Tensor]:
        sd = {}
        for name, m in self.modules.items():
            for key in ("A", "B", "A0", "B0"):
                sd[f"{name}.{key}"] = getattr(m, key).detach().cpu().contiguous()
        return sd

    def save(self, path: str | Path) -> None:
        with atomic_path(path) as tmp:
            save_file(self.state_dict(), str(tmp), metadata={"lora2r": json.dumps(self.config)})

    @torch.no_grad()
    def load_state_dict(self, sd: dict[str, torch.Tensor], source: str = "state dict") -> None:
        for name, m in self.modules.items():
            for key in ("A", "B", "A0", "B0"):
                k = f"{name}.{key}"
                if k not in sd:
                    raise InputError(f"{source}: missing adapter tensor '{k}'")
                t = getattr(m, key)
                if sd[k].shape != t.shape:
                    raise InputError(f"{source}: '{k}' has shape {tuple(sd[k].shape)}, "
                                     f"model expects {tuple(t.shape)}")
                t.copy_(sd[k].to(t.device, t.dtype))

    def load(self, path: str | Path) -> None:
        self.load_state_dict(load_file(str(path)), source=str(path))

    # -- export --------------------------------------------------------------------------
    @torch.no_grad()
    def deployed_deltas(self) -> dict[str, torch.Tensor]:
        """Per module, the deployed block's weight delta B_d·A_d − B0_d·A0_d ([d_out, d_in])."""
        r = self.r
        return {name: m.B[:, :r] @ m.A[:r] - m.B0[:, :r] @ m.A0[:r]
                for name, m in self.modules.items()}

    @torch.no_grad()
    def export_merged(self, out_dir: str | Path, tokenizer=None) -> None:
        """Save the deployed model (quarantine deleted) as a plain transformers model dir."""
        deltas = self.deployed_deltas()
        unwrapped = detach_from(self)
        originals = {name: lin.weight.detach().clone() for name, lin in unwrapped.items()}
        try:
            for name, delta in deltas.items():
                lin = unwrapped[name]
                lin.weight += delta.to(lin.weight.dtype)
            self.model.save_pretrained(str(out_dir))
            if tokenizer is not None:
                tokenizer.save_pretrained(str(out_dir))
        finally:
            # restore bit-exactly (w + d - d is not w in floating point)
            for name, w in originals.items():
                unwrapped[name].weight.copy_(w)
            reattach(self, unwrapped)

    @torch.no_grad()
    def export_peft(self, out_dir: str | Path) -> None:
        """Save the deployed block as a standard PEFT LoRA of rank 2r:
        B' = [B_d, −B0_d], A' = [A_d; A0_d], scaling 1, so B'A' = B_d·A_d − B0_d·A0_d."""
        from peft import LoraConfig, get_peft_model
        r = self.r
        unwrapped = detach_from(self)
        try:
            config = LoraConfig(r=2 * r, lora_alpha=2 * r, lora_dropout=0.0, bias="none",
                                target_modules=sorted({n.rsplit(".", 1)[-1] for n in self.modules}),
                                init_lora_weights=False)
            peft_model = get_peft_model(self.model, config)
            for name, m in self.modules.items():
                layer = peft_model.base_model.model.get_submodule(name)
                if set(layer.lora_A) != {"default"}:
                    raise RuntimeError(f"unexpected PEFT adapters on {name}")
                layer.lora_A["default"].weight.copy_(torch.cat([m.A[:r], m.A0[:r]], 0))
                layer.lora_B["default"].weight.copy_(torch.cat([m.B[:, :r], -m.B0[:, :r]], 1))
            peft_model.save_pretrained(str(out_dir))
            self.model = peft_model.unload()
        finally:
            reattach(self, unwrapped)


def _block_slice(t: torch.Tensor, mod: Lora2rLinear, is_A: bool, block: str) -> torch.Tensor:
    sl = slice(None, mod.r) if block == "deployed" else slice(mod.r, None)
    return t[sl] if is_A else t[:, sl]


def attach(model: nn.Module, r: int, init_scale: float = 1.0, seed: int = 0,
           targets: Sequence[str] = DEFAULT_TARGETS, last_layers: int | None = None) -> Lora2r:
    """Wrap every nn.Linear whose name ends with a target suffix; freeze the base model.

    last_layers: wrap only the top N decoder layers (None: all). On a CPU this is the big
    saving: no gradient has to flow below the first adapted layer."""
    if r < 1:
        raise InputError(f"adapter.r must be >= 1, got {r}")
    if last_layers is not None and last_layers < 1:
        raise InputError(f"adapter.last_layers must be >= 1 or null, got {last_layers}")
    for p in model.parameters():
        p.requires_grad_(False)
    generator = torch.Generator().manual_seed(seed)
    state = RoutingState()
    modules: dict[str, Lora2rLinear] = {}
    names = [n for n, mod in model.named_modules()
             if isinstance(mod, nn.Linear) and n.rsplit(".", 1)[-1] in targets]
    if last_layers is not None:
        index = {n: int(m.group(1)) for n in names if (m := re.search(r"\.layers\.(\d+)\.", n))}
        if not index:
            raise InputError("adapter.last_layers is set but no module name has a '.layers.N.' index")
        top = max(index.values())
        names = [n for n in names if n in index and index[n] > top - last_layers]
    if not names:
        raise InputError(f"adapter.targets {list(targets)} match no nn.Linear in the model")
    for name in names:  # named_modules order is deterministic, so the init is too
        parent_name, child = name.rsplit(".", 1)
        parent = model.get_submodule(parent_name)
        wrapped = Lora2rLinear(getattr(parent, child), name, r, init_scale, generator, state)
        setattr(parent, child, wrapped)
        modules[name] = wrapped
    config = {"r": r, "init_scale": init_scale, "seed": seed, "targets": list(targets),
              "last_layers": last_layers}
    return Lora2r(model=model, modules=modules, state=state, config=config)


def detach_from(lora: Lora2r) -> dict[str, nn.Linear]:
    """Put the plain base Linears back in the model (for export); returns them by name."""
    base = {}
    for name, m in lora.modules.items():
        parent_name, child = name.rsplit(".", 1)
        setattr(lora.model.get_submodule(parent_name), child, m.base)
        base[name] = m.base
    return base


def reattach(lora: Lora2r, base: dict[str, nn.Linear]) -> None:
    for name, m in lora.modules.items():
        parent_name, child = name.rsplit(".", 1)
        setattr(lora.model.get_submodule(parent_name), child, m)


def config_of(path: str | Path) -> dict:
    """The lora2r config stored in an adapter file's metadata."""
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if "lora2r" not in meta:
        raise InputError(f"{path}: not a lora2r adapter file (no 'lora2r' metadata)")
    return json.loads(meta["lora2r"])
