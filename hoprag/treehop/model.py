"""The TreeHop update `h = q − c + α·W_out·G(q, c)` (spec/treehop.md §3.2, layer by layer; the paper's α = 1).

`G` is an element-wise "cross-attention" (softmax over the feature axis, not over tokens), then a stack of
pre-LN residual ReLU blocks, a projection and a residual from the attention output. Every width is derived
from the embedder's dimension unless set: the paper's BGE-M3 sizes (1024 → 2048) give 25,192,448 parameters.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class _Block(nn.Module):
    """x ← x + ReLU(Linear(LayerNorm(x)))."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)

    def forward(self, x: Tensor) -> Tensor:
        return x + torch.relu(self.linear(self.norm(x)))


class _Head(nn.Module):
    """Steps 1–6 of the layer table for one head: Q(q) ⊙ K(c) softmaxed over features, times V(c), then MLP."""

    def __init__(self, dim: int, gate_dim: int, mlp_dim: int, n_mlp: int, gate_dropout: float, scale_dim: int):
        super().__init__()
        self.query, self.key, self.value = (nn.Linear(dim, gate_dim) for _ in range(3))
        self.scale = math.sqrt(scale_dim)
        self.dropout = nn.Dropout(gate_dropout)
        # the blocks are residual, so a width other than gate_dim needs a projection in (none at paper sizes)
        self.mlp_in = nn.Identity() if mlp_dim == gate_dim else nn.Linear(gate_dim, mlp_dim)
        self.mlp = nn.Sequential(*(_Block(mlp_dim) for _ in range(n_mlp)))
        self.mlp_scale = nn.Linear(mlp_dim, gate_dim)

    def attention(self, q: Tensor, c: Tensor) -> Tensor:
        """The softmax weights `a` (step 3): non-negative, summing to 1 over the gate features."""
        return torch.softmax(self.query(q) * self.key(c) / self.scale, dim=-1)

    def forward(self, q: Tensor, c: Tensor) -> Tensor:
        z = self.dropout(self.attention(q, c)) * self.value(c)
        return self.mlp_scale(self.mlp(self.mlp_in(z))) + z


class TreeHop(nn.Module):
    """Next-query embedding from a query `q` and one retrieved chunk `c`, both `[B, dim]`.

    `q` is the L2-normalised question embedding at hop 1 and the previous (un-normalised) output after;
    outputs are normalised only for search and for the loss (§6.3). `gate_scale` multiplies the gate and
    `gate_init_scale` the default initialisation of W_out (0 starts exactly at `q − c`): the levers against
    the collapse where the gate swamps `q − c` and every branch asks the same next query.

    `α` scales the gate into the correction added to `q − c`: a learnable scalar (`learn_scale`) initialised at
    `correction_init` (0: the untrained model is `q − c` exactly, and training learns how far to move from it),
    else the constant `correction_init` (the paper: 1, no extra parameter). `learn_subtraction` learns how much
    of `c` to subtract, `h = q − β·c + α·gate` with the scalar β from 1 (so still `q − c` untrained): one
    parameter, which the little training data here can set where the gate's millions overfit.
    """

    def __init__(
        self,
        dim: int,
        gate_dim: int | None = None,
        mlp_dim: int | None = None,
        n_mlp: int = 3,
        n_heads: int = 1,
        gate_dropout: float = 0.0,
        attn_scale_dim: int | None = None,
        gate_scale: float = 1.0,
        gate_init_scale: float = 1.0,
        correction_init: float = 1.0,
        learn_scale: bool = False,
        learn_subtraction: bool = False,
    ) -> None:
        super().__init__()
        if correction_init == 0 and not learn_subtraction and (not learn_scale or gate_init_scale == 0):
            raise ValueError(
                "correction_init=0 needs learn_scale=true and gate_init_scale≠0: otherwise the correction and every "
                "gradient into it stay zero, and the model is `q − c` forever"
            )
        gate_dim = gate_dim or 2 * dim
        mlp_dim = mlp_dim or gate_dim
        self.dim = dim
        self.config = {
            "dim": dim, "gate_dim": gate_dim, "mlp_dim": mlp_dim, "n_mlp": n_mlp, "n_heads": n_heads,
            "gate_dropout": gate_dropout, "attn_scale_dim": attn_scale_dim or gate_dim,
            "gate_scale": gate_scale, "gate_init_scale": gate_init_scale,
            "correction_init": correction_init, "learn_scale": learn_scale, "learn_subtraction": learn_subtraction,
        }  # fmt: skip
        # α fixed at 0 switches the gate off for good: no gate is built (no dead weights to train, save or count)
        self.gated = learn_scale or correction_init != 0
        self.heads = nn.ModuleList(
            _Head(dim, gate_dim, mlp_dim, n_mlp, gate_dropout, attn_scale_dim or gate_dim)
            for _ in range(n_heads if self.gated else 0)
        )
        self.out = nn.Linear(gate_dim * n_heads, dim, bias=False) if self.gated else None
        self.gate_scale = gate_scale
        self.alpha: Tensor | float = correction_init
        if learn_scale:
            self.alpha = nn.Parameter(torch.tensor(float(correction_init)))
        self.beta: Tensor | float = nn.Parameter(torch.tensor(1.0)) if learn_subtraction else 1.0
        if self.out is not None:
            with torch.no_grad():
                self.out.weight.mul_(gate_init_scale)

    def gate(self, q: Tensor, c: Tensor) -> Tensor:
        """`W_out · concat_heads(G(q, c))`, scaled by `gate_scale` (steps 1–8)."""
        if self.out is None:
            raise ValueError("this TreeHop has no gate (α fixed at 0: correction_init=0, learn_scale=false)")
        return self.gate_scale * self.out(torch.cat([head(q, c) for head in self.heads], dim=-1))

    def correction(self, q: Tensor, c: Tensor) -> Tensor:
        """`α · gate(q, c)`, what the model adds to `q − c` (zero without a gate)."""
        return self.alpha * self.gate(q, c) if self.gated else torch.zeros_like(q)

    def update(self, q: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """The next query `h` and its correction term (the training penalty and the collapse figures use it)."""
        correction = self.correction(q, c)
        return q - self.beta * c + correction, correction

    def forward(self, q: Tensor, c: Tensor) -> Tensor:
        return self.update(q, c)[0]

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def formula(self) -> str:
        """The update this configuration computes, e.g. `h = q − c + W_out·G(q, c)` (the paper's) or `h = q − β·c`
        (β learnt, no gate), with the gate's widths when it has one."""
        c = "β·c" if isinstance(self.beta, nn.Parameter) else ("c" if self.beta == 1 else f"{self.beta:g}·c")
        if not self.gated:
            return f"h = q − {c} (no gate)"
        alpha = "α·" if isinstance(self.alpha, nn.Parameter) else ("" if self.alpha == 1 else f"{self.alpha:g}·")
        scale = "" if self.gate_scale == 1 else f"{self.gate_scale:g}·"
        cfg = self.config
        return (f"h = q − {c} + {alpha}{scale}W_out·G(q, c), G {cfg['gate_dim']} wide × {cfg['n_heads']} "
                f"head{'s' if cfg['n_heads'] > 1 else ''}, {cfg['n_mlp']} MLP blocks of {cfg['mlp_dim']}")


class QMinusC(nn.Module):
    """The training-free update `h = q − c` (TreeHop with the gate removed), the baseline TreeHop must beat."""

    def forward(self, q: Tensor, c: Tensor) -> Tensor:
        return q - c
