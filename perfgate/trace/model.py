"""What a torch.profiler trace holds, as perfgate reads it: typed, frozen, read once.

The profiler writes Chrome trace JSON (``export_chrome_trace``, or Kineto's
``tensorboard_trace_handler``, gzipped): a flat list of events and a few header entries. perfgate
uses a handful of event kinds, and :func:`perfgate.trace.loader.parse_trace` turns each into one
of the records below, keeping the trace's own order (analyses that add times up in that order
then add them in the same order every time):

- host events: operators (``cpu_op``), ``record_function`` ranges (``user_annotation``, which is
  also where ``ProfilerStep#N`` and gloo's collectives appear) and runtime calls
  (``cuda_runtime``: the kernel launches, the synchronisations);
- GPU activity: kernels, and memory copies and sets, tied to the runtime call that launched
  them by their ``correlation`` id;
- the ``ProfilerStep#N`` windows, the ``deviceProperties`` header and ``distributedInfo``;
- Python frames (``python_function``, recorded with ``with_stack=True``), kept apart from the
  host events so they never change the nesting the analyses read: they say *where* in the
  code an op ran (its module and source line), not how long it took;
- the CUDA allocator's ``[memory]`` samples (``profile_memory=True``): reserved bytes over time.

Times are the trace's microseconds; ``end`` is ``ts + dur``. Everything else in the file
(flow arrows, counters, Python frames, metadata) is dropped. Values the JSON nests (an op's
``Input Dims``) are kept as the JSON holds them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

HostKind = Literal["op", "annotation", "runtime"]
MemoryKind = Literal["memcpy", "memset"]
Thread = tuple[Any, Any]
"""``(pid, tid)`` as the trace names them."""
Interval = tuple[float, float]
"""``(start, end)`` in trace microseconds."""


@dataclass(frozen=True, slots=True)
class HostEvent:
    """One host event: an operator, a ``record_function`` range or a runtime call."""

    name: str
    kind: HostKind
    """``op`` (``cpu_op``), ``annotation`` (``user_annotation``) or ``runtime``."""
    ts: float
    end: float
    thread: Thread
    correlation: int | None = None
    """A runtime call's launch id: the kernel or copy it launched carries the same one."""
    sequence_number: int | None = None
    """The autograd sequence number an op shares with the backward node of its result."""
    input_types: tuple[str, ...] = ()
    """``Input type`` (with ``record_shapes``): ``float``, ``c10::BFloat16``, ``Scalar``, …"""
    input_dims: Sequence[Any] = ()
    """``Input Dims`` (with ``record_shapes``): one list of sizes per input, as in the JSON."""
    concrete_inputs: tuple[str, ...] = ()
    """``Concrete Inputs`` (with ``record_shapes``): scalar arguments as text, ``""`` for a
    tensor (a dropout's probability, a softmax's dim)."""


@dataclass(frozen=True, slots=True)
class Kernel:
    """One GPU kernel, with the family and dtype its name implies."""

    name: str
    ts: float
    end: float
    device: int | None
    stream: int | None
    correlation: int | None
    family: str
    """:func:`perfgate.trace.categories.kernel_family` of the name."""
    dtype: str | None
    """:func:`perfgate.trace.categories.kernel_dtype` of the name (GEMM and conv kernels)."""


@dataclass(frozen=True, slots=True)
class MemoryOp:
    """One GPU memory copy (``Memcpy HtoD (Pageable -> Device)``, …) or memset."""

    name: str
    kind: MemoryKind
    ts: float
    end: float
    device: int | None
    stream: int | None
    correlation: int | None
    bytes: int | float | None
    """Bytes moved or set, when the trace records them."""

    @property
    def host_to_device(self) -> bool:
        return self.kind == "memcpy" and "HtoD" in self.name

    @property
    def pageable(self) -> bool:
        """A copy from pageable (not pinned) host memory: the driver stages it."""
        return "Pageable" in self.name


GpuActivity = Kernel | MemoryOp


@dataclass(frozen=True, slots=True)
class StepWindow:
    """One ``ProfilerStep#N`` range: the profiler's mark around a training step."""

    name: str
    ts: float
    end: float
    thread: Thread


@dataclass(frozen=True, slots=True)
class DeviceProperties:
    """One GPU of the trace's ``deviceProperties`` header (every visible GPU is listed)."""

    id: int | None
    name: str | None
    compute_major: int | None
    compute_minor: int | None
    total_memory: float | None = None
    """``totalGlobalMem`` in bytes, when the header records it."""


@dataclass(frozen=True, slots=True)
class PythonFrame:
    """One Python call (``with_stack=True``): ``file.py(line): function``, or a module's
    ``forward`` as ``nn.Module: ClassName_N``."""

    name: str
    ts: float
    end: float
    thread: Thread


@dataclass(frozen=True, slots=True)
class MemorySample:
    """One ``[memory]`` event of the CUDA caching allocator: what it held reserved then."""

    device: int | None
    reserved_bytes: float


@dataclass(frozen=True, slots=True)
class DistributedInfo:
    """The trace's ``distributedInfo`` header: written by a rank of a process group."""

    backend: str | None
    rank: int | None
    world_size: int | None


@dataclass(frozen=True, slots=True)
class Collective:
    """A collective as the process group records it on its own thread (``gloo:all_reduce``)."""

    name: str
    ts: float
    end: float
    thread: Thread


@dataclass(frozen=True, eq=False)
class Trace:
    """One profiler trace. Two traces are equal only if they are the same object."""

    host: tuple[HostEvent, ...]
    """Host events, in the trace's order."""
    gpu: tuple[GpuActivity, ...]
    """Kernels, copies and memsets, in the trace's order."""
    steps: tuple[StepWindow, ...]
    """One window per ``ProfilerStep#N`` (the first event of that name), by start time."""
    devices: tuple[DeviceProperties, ...]
    distributed: DistributedInfo | None
    collectives: tuple[Collective, ...]
    rocm: bool
    """The header names a ROCm runtime (``roctracer_version``, ``hip_runtime_version``)."""
    python: tuple[PythonFrame, ...] = ()
    """Python frames, in the trace's order (none unless recorded ``with_stack``)."""
    memory_samples: tuple[MemorySample, ...] = ()
    """GPU allocator samples (none unless recorded with ``profile_memory``)."""

    @functools.cached_property
    def kernels(self) -> tuple[Kernel, ...]:
        return tuple(a for a in self.gpu if isinstance(a, Kernel))

    @functools.cached_property
    def memory(self) -> tuple[MemoryOp, ...]:
        return tuple(a for a in self.gpu if isinstance(a, MemoryOp))
