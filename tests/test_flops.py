"""FLOP counting: ``count_flops`` on real training steps against counts derived by hand.

Conventions (those of ``torch.utils.flop_counter``): a matmul of an (m x k) by a (k x n) matrix
costs 2·m·n·k FLOPs (one multiply and one add per term); nothing else in a step is counted
(activations, normalisation, softmax, the loss, the optimizer). For one Linear layer applied to
M rows, with fan-in k and fan-out n:

- forward       y  = x·Wᵀ     → 2·M·k·n
- weight grad   dW = dyᵀ·x    → 2·M·k·n
- input grad    dx = dy·W     → 2·M·k·n, skipped by autograd when x does not require grad

so a training step costs 6·M·k·n per Linear, or 4·M·k·n for the first layer of a network whose
input is plain data.
"""

from __future__ import annotations

from types import ModuleType

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from perfgate.workloads import gpt, mlp
from perfgate.workloads.flops import count_flops, cpu_sdpa_backward_flops, cpu_sdpa_flops
from perfgate.workloads.protocol import KnobValue, TrainingSetup, WorkloadContext

aten = torch.ops.aten


def build(module: ModuleType, **knobs: KnobValue) -> TrainingSetup:
    """The workload of ``module`` at its smoke preset, on the CPU."""
    ctx = WorkloadContext(
        device="cpu",
        preset="smoke",
        params=module.DEFINITION.presets["smoke"],
        knobs=knobs,
        seed=0,
    )
    setup: TrainingSetup = module.build(ctx)
    return setup


def counted(setup: TrainingSetup) -> tuple[int, dict[str, int]]:
    """FLOPs of one step of ``setup`` (its eager step, as the runner counts)."""
    return count_flops(setup.flop_step or setup.step, next(iter(setup.batches)))


# --- mlp ------------------------------------------------------------------------------------


def test_mlp_step_flops_match_the_hand_count() -> None:
    p = mlp.DEFINITION.presets["smoke"]
    rows, d_in, hidden, depth, classes = (
        p["batch_size"],
        p["in_features"],
        p["hidden"],
        p["depth"],
        p["num_classes"],
    )
    assert (rows, d_in, hidden, depth, classes) == (64, 64, 128, 3, 10)
    # Linear layers (fan-in, fan-out): (64,128), (128,128), (128,128), head (128,10).
    layers = [(d_in, hidden)] + [(hidden, hidden)] * (depth - 1) + [(hidden, classes)]
    forward = sum(2 * rows * k * n for k, n in layers)
    weight_grads = forward
    # Every layer but the first passes a gradient to its input (the data needs none).
    input_grads = forward - 2 * rows * d_in * hidden
    expected = forward + weight_grads + input_grads
    # forward = 2·64·(8192 + 16384 + 16384 + 1280) = 5_406_720; the skipped first-layer input
    # gradient is 2·64·64·128 = 1_048_576.
    assert expected == 3 * 5_406_720 - 1_048_576 == 15_171_584

    total, by_operator = counted(build(mlp))
    assert total == expected
    assert sum(by_operator.values()) == total
    # Forward Linears with a bias are addmm; both backward matmuls are plain mm.
    assert by_operator == {"aten.addmm": forward, "aten.mm": weight_grads + input_grads}


def test_non_contiguous_mlp_counts_the_same_flops() -> None:
    assert counted(build(mlp, non_contiguous=True))[0] == counted(build(mlp))[0]


def test_compiled_workload_counts_on_its_eager_flop_step() -> None:
    assert counted(build(mlp, compile=True)) == counted(build(mlp))


# --- gpt ------------------------------------------------------------------------------------

GPT = gpt.DEFINITION.presets["smoke"]
B, T, C, L, H, V = (
    GPT["batch_size"],
    GPT["seq_len"],
    GPT["n_embd"],
    GPT["n_layer"],
    GPT["n_head"],
    GPT["vocab_size"],
)
Q = C // H
TOKENS = B * T


def test_gpt_smoke_dimensions() -> None:
    assert (B, T, C, L, H, Q, V) == (8, 64, 64, 2, 4, 16, 256)


def gpt_weight_matmul_flops() -> int:
    """6·M·k·n over every Linear of the GPT, M = B·T token rows.

    Per block: qkv (C→3C), attention output projection (C→C), MLP up (C→4C) and down (4C→C),
    i.e. 12·C² weights. Then the tied LM head (C→V). No Linear sees raw data — the first one
    (block 0's qkv) reads LayerNorm(embedding), which requires grad — so all take 6·M·k·n.
    """
    per_block = 3 * C * C + C * C + 4 * C * C + 4 * C * C
    matmul_weights = L * per_block + C * V
    assert matmul_weights == 2 * 49_152 + 16_384 == 114_688
    return 6 * TOKENS * matmul_weights


def attention_matmul_flops(bmm_count: int) -> int:
    """``bmm_count`` batched matmuls of (B·H) x T x T x Q size per layer, 2·B·H·T·T·Q each."""
    return L * bmm_count * 2 * B * H * T * T * Q


def test_gpt_manual_attention_flops_match_the_hand_count() -> None:
    # Explicit attention per layer: forward q·kᵀ and p·v (2 bmm); backward of each bmm gives
    # the gradient of both operands, since q, k, v and p all require grad (4 bmm).
    expected = gpt_weight_matmul_flops() + attention_matmul_flops(6)
    assert expected == 352_321_536 + 50_331_648 == 402_653_184
    total, by_operator = counted(build(gpt, attention="manual"))
    assert total == expected
    assert by_operator["aten.bmm"] == attention_matmul_flops(6)
    assert by_operator["aten.addmm"] + by_operator["aten.mm"] == gpt_weight_matmul_flops()


@pytest.mark.slow
def test_gpt_sdpa_flops_on_cpu_add_the_backward_score_recomputation() -> None:
    # On the CPU, SDPA runs aten._scaled_dot_product_flash_attention_for_cpu, for which torch's
    # FlopCounterMode has no formula; count_flops registers torch's CUDA flash formulas for it:
    # forward 2 bmm (q·kᵀ, p·v), backward 5 (the scores are recomputed, not stored). So the
    # count is the manual one plus one T x T x Q matmul per layer.
    total, by_operator = counted(build(gpt))
    assert total == gpt_weight_matmul_flops() + attention_matmul_flops(7)
    assert total - counted(build(gpt, attention="manual"))[0] == attention_matmul_flops(1)
    assert by_operator["aten._scaled_dot_product_flash_attention_for_cpu"] == (
        attention_matmul_flops(2)
    )
    assert by_operator["aten._scaled_dot_product_flash_attention_for_cpu_backward"] == (
        attention_matmul_flops(5)
    )
    assert "aten.bmm" not in by_operator


def test_plain_flop_counter_mode_counts_nothing_for_cpu_sdpa() -> None:
    # The gap count_flops fills, as found in torch 2.13. If this starts failing, torch has
    # learnt the CPU kernel and CPU_ATTENTION_FORMULAS can go.
    assert aten._scaled_dot_product_flash_attention_for_cpu not in flop_registry
    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert counter.get_total_flops() == 0


@pytest.mark.parametrize(("q_len", "k_len", "v_dim"), [(16, 16, 8), (16, 32, 12)])
def test_cpu_sdpa_formulas_equal_torch_cuda_flash_formulas(
    q_len: int, k_len: int, v_dim: int
) -> None:
    meta = torch.device("meta")
    q = torch.empty(2, 4, q_len, 8, device=meta)
    k = torch.empty(2, 4, k_len, 8, device=meta)
    v = torch.empty(2, 4, k_len, v_dim, device=meta)
    grad_out = torch.empty(2, 4, q_len, v_dim, device=meta)
    cuda_forward = flop_registry[aten._scaled_dot_product_flash_attention]
    cuda_backward = flop_registry[aten._scaled_dot_product_flash_attention_backward]
    assert cpu_sdpa_flops(q.shape, k.shape, v.shape) == cuda_forward(q, k, v, out_val=None)
    assert cpu_sdpa_backward_flops(grad_out.shape, q.shape, k.shape, v.shape) == cuda_backward(
        grad_out, q, k, v, out_val=None
    )


@pytest.mark.slow
def test_gpt_bf16_counts_the_same_matmuls() -> None:
    assert counted(build(gpt, precision="bf16"))[0] == counted(build(gpt))[0]


# --- the analytic PaLM estimate ---------------------------------------------------------------


def test_gpt_palm_estimate_matches_a_hand_computation() -> None:
    setup = build(gpt)
    # N: all parameters but the position table. Per block: qkv 3C²+3C, proj C²+C, MLP up
    # 4C²+4C, down 4C²+C, two LayerNorms 2·2C; final LayerNorm 2C; token table = tied head V·C.
    per_block = (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C) + 4 * C
    n = L * per_block + 2 * C + V * C
    assert n == 116_480
    per_token = 6 * n + 12 * L * H * Q * T
    assert per_token == 698_880 + 98_304
    assert setup.analytic_flops_per_step == per_token * TOKENS == 408_158_208
    assert setup.info["model"]["flop_parameters"] == n
    assert setup.analytic_formula is not None and "6·116480" in setup.analytic_formula


def test_palm_estimate_exceeds_the_manual_count_by_the_vector_parameters() -> None:
    # 6N counts biases and LayerNorm parameters as if they were matmul weights; the attention
    # term equals the explicit-attention count exactly (both cover the full T x T square).
    vector_parameters = L * (3 * C + C + 4 * C + C + 4 * C) + 2 * C
    estimate = build(gpt).analytic_flops_per_step
    assert estimate == counted(build(gpt, attention="manual"))[0] + 6 * TOKENS * vector_parameters


def test_palm_formula_for_the_full_preset() -> None:
    params = gpt.DEFINITION.presets["full"]
    config = gpt.GPTConfig(
        vocab_size=params["vocab_size"],
        seq_len=params["seq_len"],
        n_layer=params["n_layer"],
        n_head=params["n_head"],
        n_embd=params["n_embd"],
    )
    with torch.device("meta"):
        n = gpt.GPT(config).flop_parameters()
    tokens = params["batch_size"] * params["seq_len"]
    total, formula = gpt.palm_flops(config, n, tokens)
    assert total == (6 * n + 12 * 12 * 12 * 64 * 1024) * 16 * 1024
    assert f"6·{n} + 12·12·12·64·1024" in formula
