"""Gate an unchanged training script: a session and a ``with session.step():`` in its loop.

A team's ``train.py`` keeps its own loop, data and model code. Two additions make it a
perfgate workload::

    import perfgate

    ctx = perfgate.script_context(default_device="cuda")  # device, seed, knobs from perfgate
    ...                                                   # build model, optimizer, data as before
    session = perfgate.Session(model=model, optimizer=optimizer, samples_per_step=batch_size)
    for batch in loader:
        with session.step() as step:
            loss = train_one_batch(batch)
            step.loss = loss                              # optional: recorded, never synced

Run as ``python train.py`` the additions do nothing: ``script_context`` returns the defaults
and ``step()`` is an empty context, so the script trains as it always did. Run by perfgate
(``script = "train.py"`` in ``[tool.perfgate.workloads.NAME]``, or ``perfgate run --script
train.py``), each repeat is a fresh worker process that runs the script as ``__main__``; the
worker drives its timed loop, FLOP count, profiling window and canary slowdown from the
script's steps (``perfgate.workloads.scripted``) and ends the script, by raising
:class:`ScriptFinished` out of a ``with session.step():``, once it has every step it needs.
A step is measured from the end of the previous one, so whatever the loop does between two
steps (fetching the next batch, logging) is part of the step it precedes, as in real training,
and is also reported as the host wait outside the step.

This module imports neither torch nor the runner: a script imports it before anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from perfgate.workloads.protocol import KnobValue, WorkloadContext
from perfgate.workloads.step_feed import FeedWriter, feed_from_environment

if TYPE_CHECKING:
    import torch


class ScriptFinished(BaseException):
    """Raised out of ``with session.step():`` when perfgate has measured every step it needs.

    A ``BaseException`` (like ``KeyboardInterrupt``), so a script's ``except Exception`` around
    its loop does not swallow it; the worker catches it around the script.
    """


class StepDriver(Protocol):
    """What drives a script's steps: perfgate's worker (``perfgate.workloads.scripted``)."""

    context: WorkloadContext

    def attach(self, session: Session) -> None:
        """The script built its session: its model, optimizer and throughput unit."""

    def begin_step(self) -> None:
        """A ``with session.step():`` block is entered."""

    def end_step(self, loss: Any) -> None:
        """The block ended without an exception; may raise :class:`ScriptFinished`."""


_driver: StepDriver | None = None
_feed: FeedWriter | None = feed_from_environment()
"""The step feed of ``perfgate monitor`` when it started this process (else None)."""


def install_driver(driver: StepDriver | None) -> None:
    """Set (or, with None, clear) the driver of this process's script: the worker's, only."""
    global _driver
    _driver = driver


def script_context(default_device: str = "cpu") -> WorkloadContext:
    """The device, seed, preset parameters and knobs perfgate runs this repeat with; outside
    perfgate, ``default_device`` with no knobs (a script reads ``ctx.knobs.get(name,
    default)``, so it runs the same either way)."""
    if _driver is not None:
        return _driver.context
    return WorkloadContext(device=default_device, preset="default", params={}, knobs={}, seed=0)


@dataclass(kw_only=True)
class Session:
    """The script's training set-up, told to perfgate; ``step()`` marks each training step.

    The fields are those of a factory's :class:`~perfgate.TrainingSetup` that a loop cannot
    tell perfgate by itself: what is trained, with which optimizer, and how much work a step
    is. Created once, after the model and optimizer exist and before the first step.
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    samples_per_step: int
    """Samples (sequences, images, rows) one step consumes: the throughput unit."""
    tokens_per_step: int | None = None
    """Tokens per step, for language models (tokens/s is reported when set)."""
    compute_dtype: str = "fp32"
    """dtype of the hot matmuls (``fp32``, ``tf32``, ``bf16``, ``fp16``): picks the MFU peak."""
    analytic_flops_per_step: float | None = None
    """A closed-form FLOP estimate per step, used when counting finds none."""
    analytic_formula: str | None = None
    dataloader: Any = None
    """The ``torch.utils.data.DataLoader`` the loop iterates, for the data-loading advice."""
    knobs: Mapping[str, KnobValue] = field(default_factory=dict)
    """The knob values the script applied (recorded in the result; default: those it was
    given)."""
    info: Mapping[str, Any] = field(default_factory=dict)
    """Free-form facts worth recording (parameter counts, shapes)."""

    def __post_init__(self) -> None:
        if _driver is not None:
            _driver.attach(self)
        if _feed is not None:
            _feed.describe(self.samples_per_step, self.tokens_per_step)

    @property
    def measuring(self) -> bool:
        """True when perfgate runs this script (its steps are being measured)."""
        return _driver is not None

    def step(self) -> Step:
        """The context around one training step (the whole iteration's work on one batch)."""
        return Step(_driver)


class Step:
    """One ``with session.step() as step:`` block; set ``step.loss`` to record the loss."""

    __slots__ = ("_driver", "loss")

    def __init__(self, driver: StepDriver | None) -> None:
        self._driver = driver
        self.loss: Any = None

    def __enter__(self) -> Step:
        if _feed is not None:
            _feed.begin()
        if self._driver is not None:
            self._driver.begin_step()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if _feed is not None and kind is None:
            _feed.end()
        if kind is None and self._driver is not None:
            self._driver.end_step(self.loss)
