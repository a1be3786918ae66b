"""The built-in workloads: they train, they are deterministic, and every knob does something.

Everything here runs the smoke presets in-process on the CPU, a few real steps at a time. No
assertion is about time: this machine is too noisy for that; the runner's own tests measure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from perfgate.errors import UsageError
from perfgate.workloads import common, datapipe, ddp, gpt, mlp, resnet
from perfgate.workloads.builtin import BUILTIN_WORKLOADS, SUITES
from perfgate.workloads.knobs import STANDARD_KNOBS
from perfgate.workloads.protocol import KnobValue, TrainingSetup, WorkloadContext

NAMES = ("gpt", "resnet", "mlp", "datapipe")
MODULES = {"gpt": gpt, "resnet": resnet, "mlp": mlp, "datapipe": datapipe, "ddp": ddp}


def build(name: str, seed: int = 0, preset: str = "smoke", **knobs: KnobValue) -> TrainingSetup:
    """Build a built-in workload the way a worker does, on the CPU."""
    return build_with(name, knobs, seed, preset)


def build_with(
    name: str, knobs: Mapping[str, KnobValue], seed: int = 0, preset: str = "smoke"
) -> TrainingSetup:
    """``build`` with the knobs as a mapping (for knob names chosen by a test parameter)."""
    definition = BUILTIN_WORKLOADS[name]
    ctx = WorkloadContext(
        device="cpu",
        preset=preset,
        params=definition.preset_params(preset),
        knobs=knobs,
        seed=seed,
    )
    return MODULES[name].build(ctx)


def train(setup: TrainingSetup, steps: int) -> list[float]:
    """Run ``steps`` real training steps; the losses as floats."""
    batches = iter(setup.batches)
    return [float(setup.step(next(batches))) for _ in range(steps)]


def first_batch(setup: TrainingSetup) -> Any:
    return next(iter(setup.batches))


def eager_model(setup: TrainingSetup) -> nn.Module:
    """The uncompiled model (``torch.compile`` wraps it as ``_orig_mod``)."""
    return getattr(setup.model, "_orig_mod", setup.model)


def capture_inputs(module: nn.Module, action: Callable[[], object]) -> list[torch.Tensor]:
    """The first positional input of every call of ``module`` while ``action`` runs."""
    seen: list[torch.Tensor] = []
    handle = module.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    try:
        action()
    finally:
        handle.remove()
    return seen


def capture_outputs(module: nn.Module, action: Callable[[], object]) -> list[torch.Tensor]:
    """The output of every call of ``module`` while ``action`` runs."""
    seen: list[torch.Tensor] = []
    handle = module.register_forward_hook(lambda _m, _args, out: seen.append(out))
    try:
        action()
    finally:
        handle.remove()
    return seen


# --- every workload -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow
def test_smoke_preset_trains(name: str) -> None:
    setup = build(name)
    losses = train(setup, 4)
    assert all(math.isfinite(loss) for loss in losses)
    assert losses[-1] != losses[0]
    assert setup.samples_per_step == BUILTIN_WORKLOADS[name].presets["smoke"]["batch_size"]
    assert setup.compute_dtype == "fp32"
    assert set(setup.knobs) == set(BUILTIN_WORKLOADS[name].knobs)


@pytest.mark.parametrize("name", ("gpt", "resnet", "mlp"))
@pytest.mark.slow
def test_loss_falls_on_the_learnable_synthetic_data(name: str) -> None:
    losses = train(build(name), 12)
    assert sum(losses[-3:]) < sum(losses[:3])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow
def test_same_seed_gives_identical_losses(name: str) -> None:
    assert train(build(name, seed=3), 3) == train(build(name, seed=3), 3)


@pytest.mark.parametrize("name", ("gpt", "mlp"))
@pytest.mark.slow
def test_another_seed_gives_other_losses(name: str) -> None:
    assert train(build(name, seed=1), 2) != train(build(name, seed=2), 2)


@pytest.mark.parametrize("name", NAMES)
def test_step_returns_a_detached_scalar_tensor(name: str) -> None:
    setup = build(name)
    loss = setup.step(first_batch(setup))
    assert isinstance(loss, torch.Tensor)
    assert loss.shape == () and not loss.requires_grad


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", ("plain", "foreach", "fused"))
def test_optimizer_knob_lands_on_the_optimizer_defaults(name: str, kind: str) -> None:
    setup = build(name, optimizer=kind)
    expected = {"plain": (False, False), "foreach": (True, None), "fused": (None, True)}[kind]
    assert isinstance(setup.optimizer, torch.optim.AdamW)
    assert (setup.optimizer.defaults["foreach"], setup.optimizer.defaults["fused"]) == expected
    assert setup.info["optimizer"]["fused"] == expected[1]
    assert all(math.isfinite(loss) for loss in train(setup, 2))


@pytest.mark.parametrize("name", NAMES)
def test_batch_size_knob_overrides_the_preset(name: str) -> None:
    setup = build(name, batch_size=2)
    inputs, targets = first_batch(setup)
    assert setup.samples_per_step == 2
    assert inputs.shape[0] == 2 and targets.shape[0] == 2
    assert setup.knobs["batch_size"] == 2


@pytest.mark.parametrize("name", NAMES)
def test_zero_batch_size_is_a_usage_error(name: str) -> None:
    with pytest.raises(UsageError, match="batch_size"):
        build(name, batch_size=0)


@pytest.mark.parametrize(
    ("name", "knob", "value"),
    [
        ("gpt", "channels_last", True),
        ("gpt", "num_workers", 2),
        ("resnet", "attention", "manual"),
        ("mlp", "channels_last", True),
        ("mlp", "pin_memory", False),
        ("datapipe", "non_contiguous", True),
        ("datapipe", "attention", "manual"),
        ("gpt", "no_such_knob", 1),
    ],
)
def test_a_knob_the_workload_does_not_honour_is_a_usage_error(
    name: str, knob: str, value: KnobValue
) -> None:
    with pytest.raises(UsageError, match=f"has no knob {knob}"):
        build_with(name, {knob: value})


@pytest.mark.parametrize(
    ("knob", "value"), [("precision", "fp8"), ("attention", "flash"), ("compile", "maybe")]
)
def test_a_bad_knob_value_is_a_usage_error(knob: str, value: KnobValue) -> None:
    with pytest.raises(UsageError, match=knob):
        build_with("gpt", {knob: value})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_a_gpu_is_a_usage_error() -> None:
    ctx = WorkloadContext(
        device="cuda", preset="smoke", params=mlp.DEFINITION.presets["smoke"], knobs={}, seed=0
    )
    with pytest.raises(UsageError, match="CUDA is not available"):
        mlp.build(ctx)


# --- precision and compile (shared machinery, probed through each workload) -----------------

HOT_LAYERS: dict[str, Callable[[Any], nn.Module]] = {
    "gpt": lambda model: model.blocks[0].attn.qkv,
    "resnet": lambda model: model.stem[0],
    "mlp": lambda model: model.hidden[0],
    "datapipe": lambda model: model.features[0],
}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("precision", "dtype"),
    [("off", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)],
)
@pytest.mark.slow
def test_precision_knob_sets_the_autocast_dtype(
    name: str, precision: str, dtype: torch.dtype
) -> None:
    setup = build(name, precision=precision)
    batch = first_batch(setup)
    layer = HOT_LAYERS[name](eager_model(setup))
    outputs = capture_outputs(layer, lambda: setup.step(batch))
    assert [out.dtype for out in outputs] == [dtype]
    assert setup.compute_dtype == {"off": "fp32"}.get(precision, precision)
    assert setup.info["grad_scaler"] is (precision == "fp16")
    assert next(eager_model(setup).parameters()).dtype == torch.float32  # master weights stay fp32
    assert all(math.isfinite(loss) for loss in train(setup, 2))


def test_grad_scaler_is_made_for_fp16_only_and_works_on_the_cpu() -> None:
    scaler = common.make_grad_scaler("fp16", "cpu")
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled()
    assert common.make_grad_scaler("bf16", "cpu") is None
    assert common.make_grad_scaler("off", "cpu") is None


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow
def test_compile_knob_wraps_the_model_and_keeps_an_eager_flop_step(name: str) -> None:
    # Compiling takes tens of seconds on this CPU, so the compiled step is not run here; the
    # eager step kept for FLOP counting is, and it trains the same (shared) parameters.
    setup = build(name, compile=True)
    assert type(setup.model).__name__ == "OptimizedModule"
    assert setup.flop_step is not None and setup.flop_step is not setup.step
    before = [p.detach().clone() for p in setup.model.parameters()]
    assert math.isfinite(float(setup.flop_step(first_batch(setup))))
    after = list(setup.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert build(name).flop_step is None


def test_compute_dtype_reports_tf32_only_on_cuda_with_tf32_enabled() -> None:
    # torch.backends' flags are properties of module objects: monkeypatch cannot restore them.
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = True, False
        assert common.compute_dtype("off", "cuda") == "tf32"
        assert common.compute_dtype("off", "cuda", convolutions=True) == "fp32"
        assert common.compute_dtype("off", "cpu") == "fp32"
        assert common.compute_dtype("bf16", "cuda") == "bf16"
        assert common.compute_dtype("fp16", "cpu") == "fp16"
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


# --- gpt ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_gpt_manual_attention_matches_sdpa() -> None:
    sdpa, manual = build("gpt"), build("gpt", attention="manual")
    tokens, _ = first_batch(sdpa)
    with torch.no_grad():
        logits_sdpa, logits_manual = sdpa.model(tokens), manual.model(tokens)
    assert logits_sdpa.shape == logits_manual.shape == (8, 64, 256)
    torch.testing.assert_close(logits_manual, logits_sdpa, rtol=1e-4, atol=1e-5)
    assert train(manual, 3) == pytest.approx(train(sdpa, 3), rel=1e-4)


def test_gpt_attention_knob_selects_the_kernel() -> None:
    manual = build("gpt", attention="manual")
    softmax_calls: list[int] = []
    original = torch.nn.functional.softmax

    def counting_softmax(*args: Any, **kwargs: Any) -> torch.Tensor:
        softmax_calls.append(1)
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.nn.functional, "softmax", counting_softmax)
        train(manual, 1)
        assert len(softmax_calls) == 2  # one per layer
        softmax_calls.clear()
        train(build("gpt"), 1)
        assert softmax_calls == []  # SDPA does its softmax inside the fused kernel


def test_gpt_lm_head_is_tied_and_excluded_parameters_are_the_position_table() -> None:
    model = eager_model(build("gpt"))
    assert isinstance(model, gpt.GPT)
    assert model.lm_head.weight is model.wte.weight
    total = sum(p.numel() for p in model.parameters())
    assert model.flop_parameters() == total - 64 * 64  # wpe: seq_len x n_embd


def test_gpt_full_preset_is_gpt2_small() -> None:
    params = gpt.DEFINITION.presets["full"]
    config = gpt.GPTConfig(
        vocab_size=params["vocab_size"],
        seq_len=params["seq_len"],
        n_layer=params["n_layer"],
        n_head=params["n_head"],
        n_embd=params["n_embd"],
    )
    with torch.device("meta"):
        model = gpt.GPT(config)
    assert 124e6 < common.parameter_count(model) < 125e6
    assert config.head_dim == 64


def test_gpt_tokens_per_step_and_analytic_formula_text() -> None:
    setup = build("gpt", batch_size=4)
    assert setup.tokens_per_step == 4 * 64
    assert setup.analytic_formula is not None
    assert "12·2·4·16·64" in setup.analytic_formula and "x 256 =" in setup.analytic_formula


# --- non_contiguous -------------------------------------------------------------------------

NON_CONTIGUOUS_PROBES: dict[str, Callable[[Any], nn.Module]] = {
    "gpt": lambda model: model.blocks[0].ln1,
    "mlp": lambda model: model.hidden[1],
    "resnet": lambda model: model.stages[0],
}


def probed_contiguity(name: str, setup: TrainingSetup) -> list[bool]:
    """Whether the probe layer's input was contiguous, over one training step."""
    probe = NON_CONTIGUOUS_PROBES[name](eager_model(setup))
    batch = first_batch(setup)
    return [x.is_contiguous() for x in capture_inputs(probe, lambda: setup.step(batch))]


@pytest.mark.parametrize("name", sorted(NON_CONTIGUOUS_PROBES))
@pytest.mark.slow
def test_non_contiguous_feeds_strided_activations_with_the_same_numerics(name: str) -> None:
    plain, strided = build(name), build(name, non_contiguous=True)
    assert probed_contiguity(name, plain) == [True]
    assert probed_contiguity(name, strided) == [False]
    assert train(strided, 2) == pytest.approx(train(plain, 2), rel=1e-4)


# --- resnet ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_channels_last_puts_inputs_and_conv_weights_in_nhwc() -> None:
    setup = build("resnet", channels_last=True)
    batch = first_batch(setup)
    images, _ = batch
    nhwc = torch.channels_last
    assert images.is_contiguous(memory_format=nhwc) and not images.is_contiguous()
    convs = [m for m in eager_model(setup).modules() if isinstance(m, nn.Conv2d)]
    assert convs and all(c.weight.is_contiguous(memory_format=nhwc) for c in convs)
    outputs = capture_outputs(convs[1], lambda: setup.step(batch))
    assert outputs[0].is_contiguous(memory_format=nhwc)
    assert setup.info["memory_format"] == "channels_last"
    nchw = build("resnet")
    nchw.step(first_batch(nchw))
    assert train(setup, 3) == pytest.approx(train(nchw, 3), rel=1e-3)


def test_resnet_without_channels_last_is_nchw() -> None:
    images, _ = first_batch(build("resnet"))
    assert images.is_contiguous()


# --- datapipe -------------------------------------------------------------------------------


def test_datapipe_uses_a_real_dataloader() -> None:
    setup = build("datapipe")
    assert isinstance(setup.dataloader, DataLoader)
    assert setup.batches is setup.dataloader
    assert setup.dataloader.num_workers == 0 and not setup.dataloader.persistent_workers
    assert setup.info["samples_per_epoch"] == 1000 * 8


@pytest.mark.slow
def test_datapipe_workers_give_the_same_batches_as_the_main_process() -> None:
    in_process, workers = build("datapipe"), build("datapipe", num_workers=2)
    loader = workers.dataloader
    assert loader.num_workers == 2 and loader.persistent_workers
    assert loader.worker_init_fn is datapipe.single_threaded_worker
    assert train(workers, 3) == train(in_process, 3)


def test_datapipe_samples_depend_only_on_seed_and_index() -> None:
    def dataset(seed: int) -> datapipe.DecodedImages:
        return datapipe.DecodedImages(
            length=10,
            image_size=16,
            crop_margin=4,
            decode_scale=2,
            blur_passes=2,
            num_classes=5,
            seed=seed,
        )

    image, label = dataset(0)[7]
    assert image.shape == (3, 16, 16) and label.dtype == torch.int64
    again, same_label = dataset(0)[7]
    assert torch.equal(image, again) and label == same_label
    assert not torch.equal(image, dataset(1)[7][0])
    assert not torch.equal(image, dataset(0)[6][0])


def test_pin_memory_without_cuda_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="pin_memory"):
        build("datapipe", pin_memory=True)


def test_pin_memory_knob_reaches_the_dataloader() -> None:
    dataset = build("datapipe").dataloader.dataset
    generator = torch.Generator()
    assert datapipe.make_loader(dataset, 8, 0, True, generator).pin_memory
    assert not datapipe.make_loader(dataset, 8, 0, False, generator).pin_memory


# --- registry and definitions ---------------------------------------------------------------


def test_registry_holds_the_builtins() -> None:
    assert tuple(BUILTIN_WORKLOADS) == (*NAMES, "ddp")
    common_file = Path(common.__file__).resolve()
    for name in NAMES:
        definition = BUILTIN_WORKLOADS[name]
        module = MODULES[name]
        assert definition is module.DEFINITION
        assert definition.factory == f"perfgate.workloads.{name}:build"
        assert definition.kind == "builtin" and definition.version == 1
        assert definition.source_files == (Path(str(module.__file__)).resolve(), common_file)
        extra = {"mlp": {"cpu-large"}, "datapipe": {"balanced"}}.get(name, set())
        assert set(definition.presets) == {"smoke", "full", *extra}
        assert all(definition.knobs[k] is STANDARD_KNOBS[k] for k in definition.knobs)
        assert not definition.distributed
    distributed = BUILTIN_WORKLOADS["ddp"]
    assert distributed.distributed and distributed.factory == "perfgate.workloads.ddp:build"
    # ddp trains the gpt and resnet models: their code is part of what it measures
    assert distributed.source_files == tuple(
        Path(str(m.__file__)).resolve() for m in (ddp, common, gpt, resnet)
    )
    assert set(distributed.presets) == {"smoke", "full", "resnet-smoke", "resnet-full"}


def test_each_workload_honours_the_knobs_it_says() -> None:
    knobs = {name: set(d.knobs) for name, d in BUILTIN_WORKLOADS.items()}
    shared = {"precision", "compile", "optimizer", "batch_size"}
    assert knobs["gpt"] == shared | {"attention", "non_contiguous"}
    assert knobs["resnet"] == shared | {"channels_last", "non_contiguous"}
    assert knobs["mlp"] == shared | {"non_contiguous"}
    assert knobs["datapipe"] == shared | {"num_workers", "pin_memory"}
    assert knobs["ddp"] == shared | {
        "backend", "bucket_cap_mb", "gradient_as_bucket_view", "grad_accumulation",
        "uneven_batches",
    }  # fmt: skip


def test_suites_cover_every_builtin_at_their_preset() -> None:
    expected = {preset: tuple((name, preset) for name in NAMES) for preset in ("smoke", "full")}
    assert {**expected, "distributed": (("ddp", "smoke"), ("ddp", "resnet-smoke"))} == SUITES


def test_cycling_batches_restart_at_the_first_batch() -> None:
    batches = [(torch.tensor([i]), torch.tensor([i])) for i in range(3)]
    cycle = common.CyclingBatches(batches)
    first: Iterator[common.Batch] = iter(cycle)
    assert [int(next(first)[0]) for _ in range(5)] == [0, 1, 2, 0, 1]
    assert int(next(iter(cycle))[0]) == 0


def test_definition_hash_is_stable_and_tracks_knobs_presets_and_sources(tmp_path: Path) -> None:
    definition = gpt.DEFINITION
    resolved = {name: spec.default for name, spec in definition.knobs.items()}
    base = definition.definition_hash("smoke", resolved)
    assert base == definition.definition_hash("smoke", dict(resolved))
    assert base != definition.definition_hash("smoke", {**resolved, "attention": "manual"})
    assert base != definition.definition_hash("full", resolved)

    source = tmp_path / "workload.py"
    source.write_bytes(Path(gpt.__file__).read_bytes())
    copy = dataclasses.replace(definition, source_files=(source,))
    before = copy.definition_hash("smoke", resolved)
    assert before == copy.definition_hash("smoke", resolved)
    source.write_bytes(source.read_bytes() + b"\n# an edit\n")
    assert copy.definition_hash("smoke", resolved) != before
