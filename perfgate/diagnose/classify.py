"""What bounds a training step: GPU or CPU compute, GPU memory, the host, the input pipeline,
storage or communication — decided from measured signals, with the numbers that decided it.

Pure: :class:`Signals` in, :class:`Diagnosis` (``perfgate.documents.diagnosis``) out. The checks
run in a fixed order, each against a threshold written down here (and in the README's guide),
and the first that holds wins:

1. **communication** — exposed collective time (not overlapped by computation) is at least
   ``COMMUNICATION_SHARE`` of the step: the step waits on the network more than on anything
   else a data-parallel job can fix locally.
2. **storage** — the step waits for its batches (``dataloader_wait_share`` at least
   ``STORAGE_WAIT_SHARE``) while the process reads from disk (at least ``STORAGE_READ_BPS``)
   and it stalls on I/O (I/O wait at least ``STORAGE_IOWAIT_SHARE``, or I/O pressure at least
   ``STORAGE_PRESSURE_SHARE``): the wait is the disk, not the preprocessing. Checked before
   the input pipeline because both show as batch wait.
3. **input pipeline** — the batch wait alone is at least ``INPUT_WAIT_SHARE`` of the step.
4. **GPU runs** — from the GPU timeline (a profiler trace) when there is one: idle at least
   ``HOST_IDLE_SHARE`` of the step with none of the waits above is **host**-bound (the GPU
   waits for the host to launch work); busy, it is **compute**-bound when its kernels are
   mostly matmul/convolution/attention (high arithmetic intensity) and **memory**-bound when
   they are mostly elementwise, copies and layout changes (a byte moved per few FLOPs: the
   roofline's memory side). Without a trace, an MFU of at least ``COMPUTE_FRACTION`` says
   compute-bound; NVML's utilisation alone is too coarse (it means "a kernel ran during the
   sample", not how much of the GPU).
5. **CPU runs** — the achieved FLOP rate against the machine's own measured matmul ceiling
   (``perfgate doctor --peak``): at least ``COMPUTE_FRACTION`` is **compute**-bound; under
   ``HOST_FRACTION`` the arithmetic is a sliver of the step and dispatching many small ops is
   what costs: **host**-bound (framework overhead). Without a stored ceiling the two cannot be
   told apart, and the answer is undetermined, saying so.

Anything else is **undetermined**, with the reason: a wrong label is worse than none.
Confidence is ``high`` when the deciding value is at least 1.5x its threshold, ``medium``
above it, ``low`` when the deciding signal is itself rough (a ceiling fraction in the band
between host and compute).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.documents.diagnosis import Bound, Confidence, Diagnosis

COMMUNICATION_SHARE = 0.3
"""Exposed collectives at 30 % of the step outweigh any single compute category we see."""
STORAGE_WAIT_SHARE = 0.2
STORAGE_READ_BPS = 1e6
"""1 MB/s of real block reads: more than logging or imports, less than any data loading."""
STORAGE_IOWAIT_SHARE = 0.05
"""5 % of all CPUs' time in I/O wait (psutil's iowait over the window)."""
STORAGE_PRESSURE_SHARE = 0.1
"""10 % of the time some task stalled on I/O (Linux pressure stall information). I/O wait is
only counted on an idle CPU: with other work keeping the CPUs busy it reads 0 while the reader
still stalls, and the pressure figure still shows it."""
INPUT_WAIT_SHARE = 0.3
"""The step spends 30 % waiting for batches: more than the ``dataloader-starvation`` rule's
10 % trigger, so a workload with a fixable but minor wait is not called input-bound."""
HOST_IDLE_SHARE = 0.4
"""The GPU idles 40 % of the step with no data or communication wait to explain it."""
COMPUTE_FRACTION = 0.3
"""30 % of the (vendor or measured) matmul peak: real training at that level is compute-bound;
the rest of the step is the non-matmul work every model has."""
HOST_FRACTION = 0.1
"""Under 10 % of the measured ceiling, the arithmetic is a sliver of the step."""
STRONG = 1.5
"""A deciding value this many times its threshold gives high confidence."""

ADVICE_CATEGORIES: dict[str, frozenset[str]] = {
    "communication": frozenset({"distributed"}),
    "storage": frozenset({"input-pipeline"}),
    "input-pipeline": frozenset({"input-pipeline"}),
    "host": frozenset({"launch-overhead", "host-sync", "optimizer", "fusion", "runtime", "batch"}),
    "compute": frozenset({"precision", "kernels"}),
    "memory": frozenset({"fusion", "memory-layout", "kernels"}),
    "undetermined": frozenset(),
}
"""Rule categories whose fixes act on each bound: the advisor ranks them first. A faster
matmul cannot shorten a step that waits for its batches (Amdahl over the binding resource)."""


@dataclass(frozen=True, kw_only=True)
class Signals:
    """The measured values a diagnosis may use; None where not measured (never a stand-in 0)."""

    device: str
    dataloader_wait_share: float | None = None
    """Share of the step spent in ``next(batches)``."""
    communication_exposed_share: float | None = None
    """Share of the step in collectives no computation overlapped."""
    read_bytes_per_s: float | None = None
    """Block-device reads of the process tree over the measured window."""
    iowait_share: float | None = None
    """Share of all CPUs' time in I/O wait over the measured window (0-1)."""
    io_pressure_share: float | None = None
    """Share of the window some task was stalled on I/O (Linux ``/proc/pressure/io``, 0-1)."""
    cpu_busy: float | None = None
    """CPU time of the process tree over the window, as a share of the CPUs it may use."""
    ceiling_fraction: float | None = None
    """Achieved FLOP/s over the measured matmul ceiling of this machine (doctor --peak)."""
    mfu: float | None = None
    """Achieved FLOP/s over the vendor's dense peak."""
    gpu_busy: float | None = None
    """Share of the step some kernel ran, from a profiler trace's GPU timeline."""
    compute_kernel_share: float | None = None
    """Matmul, convolution and attention kernels' share of the step (trace)."""
    memory_kernel_share: float | None = None
    """Elementwise, copy, layout-conversion and host-to-device kernels' share (trace)."""


def classify(signals: Signals) -> Diagnosis:
    """The first check (in the module's order) that holds, or undetermined with the reason."""
    for check in (_communication, _storage, _input_pipeline):
        found = check(signals)
        if found is not None:
            return found
    return _gpu(signals) if signals.device == "cuda" else _cpu(signals)


def _confidence(value: float, threshold: float) -> Confidence:
    return "high" if value >= STRONG * threshold else "medium"


def _diagnosis(
    signals: Signals, bound: Bound, confidence: Confidence, reason: str, **evidence: float | None
) -> Diagnosis:
    return Diagnosis(
        bound=bound,
        device=signals.device,
        confidence=confidence,
        reason=reason,
        evidence={k: v for k, v in evidence.items() if v is not None},
    )


def _communication(s: Signals) -> Diagnosis | None:
    exposed = s.communication_exposed_share
    if exposed is None or exposed < COMMUNICATION_SHARE:
        return None
    return _diagnosis(
        s,
        "communication",
        _confidence(exposed, COMMUNICATION_SHARE),
        f"collectives no computation overlapped take {exposed:.0%} of the step "
        f"(≥ {COMMUNICATION_SHARE:.0%})",
        communication_exposed_share=exposed,
    )


def _storage(s: Signals) -> Diagnosis | None:
    wait, reads = s.dataloader_wait_share, s.read_bytes_per_s
    if wait is None or reads is None or wait < STORAGE_WAIT_SHARE or reads < STORAGE_READ_BPS:
        return None
    stalls = [
        (value / threshold, text)
        for value, threshold, text in (
            (s.iowait_share, STORAGE_IOWAIT_SHARE, "the CPUs spend {:.0%} in I/O wait (≥ {:.0%})"),
            (s.io_pressure_share, STORAGE_PRESSURE_SHARE, "tasks stall on I/O {:.0%} of the time "
             "(≥ {:.0%})"),
        )
        if value is not None and value >= threshold
        for text in [text.format(value, threshold)]
    ]  # fmt: skip
    if not stalls:
        return None
    strength, text = max(stalls)
    return _diagnosis(
        s,
        "storage",
        _confidence(min(wait / STORAGE_WAIT_SHARE, strength), 1.0),
        f"the step waits {wait:.0%} of its time for batches (≥ {STORAGE_WAIT_SHARE:.0%}) while "
        f"the process reads {reads / 1e6:.1f} MB/s from disk and {text}",
        dataloader_wait_share=wait,
        read_bytes_per_s=reads,
        iowait_share=s.iowait_share,
        io_pressure_share=s.io_pressure_share,
        cpu_busy=s.cpu_busy,
    )


def _input_pipeline(s: Signals) -> Diagnosis | None:
    wait = s.dataloader_wait_share
    if wait is None or wait < INPUT_WAIT_SHARE:
        return None
    return _diagnosis(
        s,
        "input-pipeline",
        _confidence(wait, INPUT_WAIT_SHARE),
        f"the step waits {wait:.0%} of its time for the next batch (≥ {INPUT_WAIT_SHARE:.0%})"
        + (
            ", without the disk reads and I/O wait of a storage-bound one"
            if s.read_bytes_per_s is not None and s.iowait_share is not None
            else " (disk reads and I/O wait were not measured)"
        ),
        dataloader_wait_share=wait,
        read_bytes_per_s=s.read_bytes_per_s,
        iowait_share=s.iowait_share,
    )


def _gpu(s: Signals) -> Diagnosis:
    busy = s.gpu_busy
    if busy is not None and 1 - busy >= HOST_IDLE_SHARE:
        idle = 1 - busy
        return _diagnosis(
            s,
            "host",
            _confidence(idle, HOST_IDLE_SHARE),
            f"the GPU is idle {idle:.0%} of the step (≥ {HOST_IDLE_SHARE:.0%}) with no batch or "
            "communication wait to explain it: it waits for the host to launch work",
            gpu_idle_share=idle,
            dataloader_wait_share=s.dataloader_wait_share,
            communication_exposed_share=s.communication_exposed_share,
        )
    compute, memory = s.compute_kernel_share, s.memory_kernel_share
    if busy is not None and compute is not None and memory is not None and compute + memory > 0:
        bound: Bound = "compute" if compute >= memory else "memory"
        major, minor = (compute, memory) if bound == "compute" else (memory, compute)
        kinds = (
            ("matmul/convolution/attention", "elementwise/copy/layout")
            if bound == "compute"
            else ("elementwise/copy/layout", "matmul/convolution/attention")
        )
        return _diagnosis(
            s,
            bound,
            "high" if major >= STRONG * minor else "medium",
            f"the GPU is busy {busy:.0%} of the step, {major:.0%} of it in {kinds[0]} kernels "
            f"against {minor:.0%} in {kinds[1]} ones",
            gpu_busy=busy,
            compute_kernel_share=compute,
            memory_kernel_share=memory,
            mfu=s.mfu,
        )
    if s.mfu is not None and s.mfu >= COMPUTE_FRACTION:
        return _diagnosis(
            s,
            "compute",
            _confidence(s.mfu, COMPUTE_FRACTION),
            f"MFU {s.mfu:.0%} of the vendor peak (≥ {COMPUTE_FRACTION:.0%})",
            mfu=s.mfu,
            ceiling_fraction=s.ceiling_fraction,
        )
    return _diagnosis(
        s,
        "undetermined",
        "low",
        "no GPU timeline (run perfgate diagnose, which profiles a window) and an MFU "
        + (f"of {s.mfu:.0%}, " if s.mfu is not None else "that is unknown, ")
        + "too low to call compute-bound from step times alone",
        mfu=s.mfu,
    )


def _cpu(s: Signals) -> Diagnosis:
    fraction = s.ceiling_fraction
    if fraction is None:
        return _diagnosis(
            s,
            "undetermined",
            "low",
            "without the machine's measured matmul ceiling the CPU's own arithmetic cannot be "
            "told from framework overhead: run perfgate doctor --peak once on this machine",
            cpu_busy=s.cpu_busy,
            dataloader_wait_share=s.dataloader_wait_share,
        )
    if fraction >= COMPUTE_FRACTION:
        return _diagnosis(
            s,
            "compute",
            _confidence(fraction, COMPUTE_FRACTION),
            f"it reaches {fraction:.0%} of this machine's measured matmul ceiling "
            f"(≥ {COMPUTE_FRACTION:.0%}) with no batch, storage or communication wait",
            ceiling_fraction=fraction,
            cpu_busy=s.cpu_busy,
        )
    if fraction < HOST_FRACTION:
        return _diagnosis(
            s,
            "host",
            "high" if fraction * STRONG <= HOST_FRACTION else "medium",
            f"its arithmetic runs at {fraction:.1%} of this machine's measured matmul ceiling "
            f"(< {HOST_FRACTION:.0%}) with no batch, storage or communication wait: dispatching "
            "many small operations costs more than the work they do",
            ceiling_fraction=fraction,
            cpu_busy=s.cpu_busy,
        )
    return _diagnosis(
        s,
        "compute",
        "low",
        f"it reaches {fraction:.0%} of the measured matmul ceiling: between the host-bound "
        f"{HOST_FRACTION:.0%} and the compute-bound {COMPUTE_FRACTION:.0%}, partly overhead",
        ceiling_fraction=fraction,
        cpu_busy=s.cpu_busy,
    )
