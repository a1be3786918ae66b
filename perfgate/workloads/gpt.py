"""``gpt``: a decoder-only transformer language model (GPT-2 architecture) on synthetic tokens.

Token + learned position embeddings, pre-LayerNorm blocks (causal self-attention with one fused
qkv projection, a 4x GELU MLP, residual connections), a final LayerNorm and an LM head **tied**
to the token embedding, as in GPT-2: the ``full`` preset is then GPT-2 small (124M parameters).
No dropout: a benchmark step should be the same arithmetic every time.

The synthetic corpus is learnable on purpose: every sequence follows one fixed random
permutation of the vocabulary (``next = perm[current]``) from a random start token, so the loss
visibly falls within a few steps, which is what tells a broken step from a working one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.workloads.builtin import BUILTIN_WORKLOADS
from perfgate.workloads.common import (
    SYNTHETIC_BATCHES,
    Batch,
    batch_size,
    check_device,
    effective_knobs,
    make_training,
    parameter_count,
    resident_batches,
    seed_everything,
)
from perfgate.workloads.protocol import TrainingSetup, WorkloadContext

DEFINITION = BUILTIN_WORKLOADS["gpt"]
"""This workload's entry in the torch-free catalog (:mod:`perfgate.workloads.builtin`)."""


@dataclass(frozen=True)
class GPTConfig:
    """Model shape and the two knobs that change the model's own forward pass."""

    vocab_size: int
    seq_len: int
    n_layer: int
    n_head: int
    n_embd: int
    attention: str = "sdpa"
    non_contiguous: bool = False

    @property
    def head_dim(self) -> int:
        """Q in PaLM's notation: the width of one attention head."""
        return self.n_embd // self.n_head


def sequence_major(x: torch.Tensor) -> torch.Tensor:
    """The same ``(B, T, C)`` values, stored sequence-major: a strided view over a real copy.

    Used by ``non_contiguous``: every block then pays the transpose copy here plus the hidden
    ``.contiguous()`` copies that LayerNorm and Linear make of a strided input; all visible in a
    profile as ``aten::copy_``/``clone`` kernels, forward and backward, with unchanged numerics.
    """
    return x.transpose(0, 1).contiguous().transpose(0, 1)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: fused qkv projection, then SDPA or explicit matmuls."""

    causal_mask: torch.Tensor

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.manual = config.attention == "manual"
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        mask = torch.ones(config.seq_len, config.seq_len, dtype=torch.bool).tril()
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        heads = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, seq, self.n_head, -1).transpose(1, 2) for t in heads)
        y = (
            self._manual(q, k, v)
            if self.manual
            else F.scaled_dot_product_attention(q, k, v, is_causal=True)
        )
        return self.proj(y.transpose(1, 2).reshape(batch, seq, width))

    def _manual(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(q·kᵀ/√Q + causal mask)·v as separate kernels (materialises the TxT scores)."""
        seq = q.size(-2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
        scores = scores.masked_fill(~self.causal_mask[:seq, :seq], float("-inf"))
        return F.softmax(scores, dim=-1) @ v


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.non_contiguous = config.non_contiguous
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.non_contiguous:
            x = sequence_major(x)
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """The language model: embeddings, blocks, final LayerNorm, tied LM head → logits."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.seq_len, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.apply(_init_weights)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.size(1), device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def flop_parameters(self) -> int:
        """N of PaLM's formula: every parameter except the position-embedding table.

        The token table is counted (once) because it is also the tied LM head, whose matmul
        costs 6 FLOPs per weight per token like any other; the position lookup costs none. Biases
        and LayerNorm weights are included, as in nanoGPT's ``estimate_mfu``.
        """
        return parameter_count(self) - self.wpe.weight.numel()


def _init_weights(module: nn.Module) -> None:
    """GPT-2's initialisation: N(0, 0.02) weights, zero biases."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def palm_flops(config: GPTConfig, flop_parameters: int, tokens: int) -> tuple[float, str]:
    """PaLM's training FLOPs per step (Chowdhery et al. 2022, appendix B) and the formula.

    Per token: 6N for the weight matmuls (2N forward, 4N backward) plus 12·L·H·Q·T for the
    attention score and value matmuls, counted over the full TxT square (no causal discount).
    """
    layers, heads, head_dim, seq = (config.n_layer, config.n_head, config.head_dim, config.seq_len)
    per_token = 6 * flop_parameters + 12 * layers * heads * head_dim * seq
    total = float(per_token * tokens)
    formula = (
        f"PaLM: (6N + 12·L·H·Q·T) per token x tokens/step = "
        f"(6·{flop_parameters} + 12·{layers}·{heads}·{head_dim}·{seq}) x {tokens} = {total:.6g} "
        f"(N = all parameters except the position embedding; the token embedding counts "
        f"once as the tied LM head)"
    )
    return total, formula


def synthetic_sequences(
    generator: torch.Generator, config: GPTConfig, batch: int, count: int
) -> list[Batch]:
    """``count`` batches of (tokens, next tokens), each sequence a walk along one permutation."""
    perm = torch.randperm(config.vocab_size, generator=generator)
    walk = torch.empty(count * batch, config.seq_len + 1, dtype=torch.long)
    walk[:, 0] = torch.randint(config.vocab_size, (count * batch,), generator=generator)
    for position in range(config.seq_len):
        walk[:, position + 1] = perm[walk[:, position]]
    return [(chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()) for chunk in walk.split(batch)]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over every position of every sequence."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def build(ctx: WorkloadContext) -> TrainingSetup:
    """The factory: a GPT, its synthetic token batches and one training step."""
    knobs = effective_knobs(DEFINITION, ctx)
    device = check_device(ctx.device)
    params = ctx.params
    config = GPTConfig(
        vocab_size=int(params["vocab_size"]),
        seq_len=int(params["seq_len"]),
        n_layer=int(params["n_layer"]),
        n_head=int(params["n_head"]),
        n_embd=int(params["n_embd"]),
        attention=str(knobs["attention"]),
        non_contiguous=bool(knobs["non_contiguous"]),
    )
    batch = batch_size(knobs, params)
    data_generator = seed_everything(ctx.seed)
    model = GPT(config).to(device)
    batches = resident_batches(
        synthetic_sequences(data_generator, config, batch, SYNTHETIC_BATCHES), device
    )
    training = make_training(model, lm_loss, knobs, ctx.device, lr=float(params["lr"]))
    tokens_per_step = batch * config.seq_len
    analytic, formula = palm_flops(config, model.flop_parameters(), tokens_per_step)
    return training.setup(
        batches=batches,
        samples_per_step=batch,
        tokens_per_step=tokens_per_step,
        analytic_flops_per_step=analytic,
        analytic_formula=formula,
        knobs=knobs,
        info={
            "model": {
                **asdict(config),
                "parameters": parameter_count(model),
                "flop_parameters": model.flop_parameters(),
                "tied_lm_head": True,
            },
            "batch_shape": [batch, config.seq_len],
        },
    )
