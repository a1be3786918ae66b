"""Shared machinery of the built-in workloads: seeding, knobs → optimizer/autocast/compile, the
training step and synthetic batches.

Every built-in differs only in its model, its data and its loss; everything a knob switches is
done here, once, so that flipping a knob means the same thing in every workload and the advisor
can trust that ``optimizer=fused`` in ``gpt`` and in ``resnet`` changed exactly one thing.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from perfgate.errors import UsageError
from perfgate.workloads.definition import WorkloadDefinition
from perfgate.workloads.knobs import resolve_knobs
from perfgate.workloads.protocol import KnobValue, TrainingSetup, WorkloadContext

Batch = tuple[torch.Tensor, torch.Tensor]
"""``(inputs, targets)``: the batch shape every built-in workload uses."""

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss_fn(model_output, targets) -> scalar loss``."""

SYNTHETIC_BATCHES = 4
"""Distinct pre-generated batches a synthetic workload cycles through: enough that the model does
not see one batch over and over, few enough to generate (untimed) in a moment."""

DATA_SEED_OFFSET = 1_000_003
"""Added to ``ctx.seed`` for the data generator, so data and initial weights use different
random streams while both still follow from the one seed."""

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def effective_knobs(definition: WorkloadDefinition, ctx: WorkloadContext) -> dict[str, KnobValue]:
    """``ctx.knobs`` validated against the workload's knobs, with defaults filled in.

    The runner resolves knobs already; resolving again here lets a factory be called directly
    (tests, notebooks) and rejects a knob the workload does not honour instead of ignoring it.
    """
    return resolve_knobs(definition.name, definition.knobs, ctx.knobs)


def check_device(device: str) -> torch.device:
    """The torch device for ``ctx.device``; a usage error for one this machine does not have."""
    if device not in {"cpu", "cuda"}:
        raise UsageError(f"device {device!r} is not supported", "use cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("device cuda was requested but CUDA is not available", "use --device cpu")
    return torch.device(device)


def seed_everything(seed: int) -> torch.Generator:
    """Seed torch's global RNG (initial weights) and return a CPU generator for synthetic data.

    Weights are initialised on the CPU and then moved, and data are drawn from the CPU generator,
    so the same seed gives the same starting point on every device.
    """
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + DATA_SEED_OFFSET)


def batch_size(knobs: Mapping[str, KnobValue], params: Mapping[str, Any]) -> int:
    """The ``batch_size`` knob if set, else the preset's; zero is rejected."""
    value = knobs.get("batch_size")
    size = int(params["batch_size"]) if value is None else int(value)
    if size < 1:
        raise UsageError(f"batch_size={size} is not positive", "give a batch size of at least 1")
    return size


def make_optimizer(
    parameters: Iterable[nn.Parameter], kind: str, lr: float, weight_decay: float
) -> torch.optim.AdamW:
    """AdamW in the implementation the ``optimizer`` knob names.

    ``plain`` is the per-parameter for-loop (``foreach=False, fused=False``), ``foreach`` the
    multi-tensor kernels, ``fused`` the single fused kernel (CUDA, and CPU since torch 2.4).
    """
    foreach = {"plain": False, "foreach": True, "fused": None}[kind]
    fused = {"plain": False, "foreach": None, "fused": True}[kind]
    try:
        return torch.optim.AdamW(
            parameters, lr=lr, weight_decay=weight_decay, foreach=foreach, fused=fused
        )
    except RuntimeError as exc:  # fused kernels missing for this device or dtype
        raise UsageError(
            f"optimizer={kind} is not available here ({exc})", "use optimizer=foreach"
        ) from None


def check_precision(precision: str, device: str) -> None:
    """Reject a precision the device cannot run (bf16 on a GPU without bf16 support)."""
    if precision == "bf16" and device == "cuda" and not torch.cuda.is_bf16_supported():
        raise UsageError("precision=bf16 needs a GPU with bfloat16 support", "use precision=fp16")


def autocast_factory(precision: str, device: str) -> Callable[[], AbstractContextManager[Any]]:
    """A fresh autocast context per step for ``bf16``/``fp16``, a no-op context for ``off``."""
    dtype = _AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=device, dtype=dtype)


def make_grad_scaler(precision: str, device: str) -> torch.amp.GradScaler | None:
    """A GradScaler for fp16 (its narrow exponent range underflows small gradients), else None.

    ``torch.amp.GradScaler(device)`` works for both ``cpu`` and ``cuda``. Note that its
    ``step`` reads the inf-check result on the host, one synchronisation per step, as in any
    real fp16 training loop.
    """
    return torch.amp.GradScaler(device) if precision == "fp16" else None


def compute_dtype(precision: str, device: str, *, convolutions: bool = False) -> str:
    """The dtype of the hot kernels, which selects the peak FLOP/s for MFU.

    Under autocast it is the autocast dtype. In fp32 on CUDA, matmuls run on TF32 tensor cores
    when ``torch.backends.cuda.matmul.allow_tf32`` is set and convolutions when
    ``torch.backends.cudnn.allow_tf32`` is (cuDNN's default is on, cuBLAS's is off).
    """
    if precision != "off":
        return precision
    if device == "cuda":
        tf32 = (
            torch.backends.cudnn.allow_tf32
            if convolutions
            else torch.backends.cuda.matmul.allow_tf32
        )
        if tf32:
            return "tf32"
    return "fp32"


@dataclass(frozen=True)
class Training:
    """The knob-dependent half of a TrainingSetup, common to all built-ins."""

    model: nn.Module
    """The model the timed step calls (compiled when ``compile`` is on)."""
    optimizer: torch.optim.AdamW
    step: Callable[[Batch | MicroBatches], torch.Tensor]
    flop_step: Callable[[Batch | MicroBatches], torch.Tensor] | None
    """The same step on the eager model when ``step`` is compiled, for FLOP counting."""
    compute_dtype: str
    info: Mapping[str, Any]

    def setup(
        self,
        *,
        batches: Iterable[Batch],
        samples_per_step: int,
        knobs: Mapping[str, KnobValue],
        info: Mapping[str, Any],
        **extra: Any,
    ) -> TrainingSetup:
        """The TrainingSetup of a built-in: this half, plus the workload's data and facts.

        ``extra`` carries the optional protocol fields a workload sets (tokens per step, the
        analytic FLOP estimate, the DataLoader).
        """
        return TrainingSetup(
            model=self.model,
            optimizer=self.optimizer,
            batches=batches,
            step=self.step,
            flop_step=self.flop_step,
            samples_per_step=samples_per_step,
            compute_dtype=self.compute_dtype,
            knobs=knobs,
            info={**self.info, **info},
            **extra,
        )


def make_training(
    model: nn.Module,
    loss_fn: LossFn,
    knobs: Mapping[str, KnobValue],
    device: str,
    *,
    lr: float,
    weight_decay: float = 0.01,
    convolutions: bool = False,
) -> Training:
    """Optimizer, autocast, GradScaler and torch.compile as the knobs say, around ``model``.

    ``model`` must already be on ``device`` (and in its final memory format): the optimizer's
    state is created for the parameters where they live.
    """
    precision = str(knobs["precision"])
    check_precision(precision, device)
    optimizer = make_optimizer(model.parameters(), str(knobs["optimizer"]), lr, weight_decay)
    autocast = autocast_factory(precision, device)
    scaler = make_grad_scaler(precision, device)
    compiled = bool(knobs["compile"])
    timed_model = cast(nn.Module, torch.compile(model)) if compiled else model
    return Training(
        model=timed_model,
        optimizer=optimizer,
        step=train_step(timed_model, optimizer, loss_fn, device, autocast, scaler),
        flop_step=train_step(model, optimizer, loss_fn, device, autocast, scaler)
        if compiled
        else None,
        compute_dtype=compute_dtype(precision, device, convolutions=convolutions),
        info={"optimizer": optimizer_info(optimizer), "grad_scaler": scaler is not None},
    )


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    device: str,
    autocast: Callable[[], AbstractContextManager[Any]],
    scaler: torch.amp.GradScaler | None,
) -> Callable[[Batch | MicroBatches], torch.Tensor]:
    """One full training step on one batch, returning the detached loss.

    The loss is not read with ``.item()``: the runner collects losses without forcing a device
    synchronisation per step. Gradients are dropped with ``set_to_none=True`` so no memset is
    timed.

    A :class:`MicroBatches` batch is gradient accumulation: each micro-batch's loss is scaled by
    1/k and back-propagated, all but the last under the model's ``no_sync()`` when it has one
    (DistributedDataParallel), so gradients are all-reduced once per optimizer step.
    """

    def backward(loss: torch.Tensor) -> None:
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()

    def step(batch: Batch | MicroBatches) -> torch.Tensor:
        micro = batch if isinstance(batch, MicroBatches) else (batch,)
        optimizer.zero_grad(set_to_none=True)
        total: torch.Tensor | None = None
        for index, (inputs, targets) in enumerate(micro):
            inputs = inputs.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            last = index == len(micro) - 1
            with contextlib.nullcontext() if last else _no_sync(model):
                with autocast():
                    loss = loss_fn(model(inputs), targets)
                    if len(micro) > 1:
                        loss = loss / len(micro)
                backward(loss)
            total = loss.detach() if total is None else total + loss.detach()
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        assert total is not None
        return total

    return step


class MicroBatches(tuple[Batch, ...]):
    """The micro-batches of one optimizer step (gradient accumulation), oldest first."""


def _no_sync(model: nn.Module) -> AbstractContextManager[Any]:
    """DDP's ``no_sync()`` (also through a ``torch.compile`` wrapper); a no-op for other models."""
    no_sync = getattr(model, "no_sync", None)
    return no_sync() if callable(no_sync) else contextlib.nullcontext()


def optimizer_info(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Class and implementation flags of the optimizer, as recorded for the advisor."""
    defaults = optimizer.defaults
    return {
        "class": type(optimizer).__name__,
        "foreach": defaults.get("foreach"),
        "fused": defaults.get("fused"),
        "lr": defaults.get("lr"),
        "weight_decay": defaults.get("weight_decay"),
    }


def parameter_count(model: nn.Module) -> int:
    """Number of distinct parameter elements (a tied weight counts once)."""
    return sum(parameter.numel() for parameter in model.parameters())


def resident_batches(
    batches: Iterable[Batch],
    device: torch.device,
    input_format: torch.memory_format = torch.preserve_format,
) -> CyclingBatches:
    """Synthetic batches moved once to ``device`` (inputs in ``input_format``), then cycled.

    Keeping them resident makes the step's host-to-device copy a no-op, so the synthetic
    workloads time the model alone; the input pipeline is what ``datapipe`` measures.
    """
    return CyclingBatches(
        [(x.to(device, memory_format=input_format), y.to(device)) for x, y in batches]
    )


class CyclingBatches:
    """An endless iterable over a few pre-generated batches.

    Generating data outside the timed loop keeps the synthetic workloads measuring the model,
    not the random number generator; every ``iter()`` starts again at the first batch, so two
    runs with the same seed see the same batch sequence.
    """

    def __init__(self, batches: Sequence[Batch]) -> None:
        self._batches = tuple(batches)

    def __iter__(self) -> Iterator[Batch]:
        return itertools.cycle(self._batches)
