"""Facts read from the live training objects inside the profiling worker, beside its trace.

A trace shows what ran; it cannot show what was *configured*: whether the optimizer was built
fused, how many DataLoader workers there are, whether cuDNN autotuning or TF32 is on. Advice
that fires while the fix is already on (DLProf recommending AMP with AMP enabled) comes from
guessing these, so they are read from the objects themselves. Keys are catalogue names
(``perfgate.advise.catalogue``); a fact that does not apply (no DataLoader, no convolutions, a
CPU run's GPU settings) is left out.

Three further keys are inputs, not evidence: the parent combines them with the trace's step
time (``DERIVATION_INPUTS``).
"""

from __future__ import annotations

import gc
import inspect
import os
import resource
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from perfgate.telemetry.peaks import lookup_peak
from perfgate.workloads.protocol import KnobValue, TrainingSetup

if TYPE_CHECKING:
    import torch

Facts = dict[str, float | bool | str]
"""Catalogue name (or derivation input) → value."""

DERIVATION_INPUTS = ("flops_per_step", "peak_tflops", "gc_pause_ms_per_step")
"""Facts the parent turns into ``achieved_tflops``, ``mfu`` and ``gc_pause_share`` with the
trace's step time."""


def collect_facts(
    setup: TrainingSetup, device: str, knobs: Mapping[str, KnobValue], flops_per_step: float | None
) -> Facts:
    """Every fact this worker can read about the workload it just profiled."""
    facts: Facts = {
        "device": device,
        "batch_size": float(setup.samples_per_step),
        "compute_dtype": setup.compute_dtype,
        "cpu_cores_available": float(cpu_cores_available()),
        **optimizer_facts(setup.optimizer),
        **dataloader_facts(setup.dataloader),
        **model_facts(setup.model, knobs),
        **precision_facts(device, knobs),
        **memory_facts(device),
        **distributed_facts(setup.model, knobs, device),
    }
    if flops_per_step:
        facts["flops_per_step"] = float(flops_per_step)
    if device == "cuda":
        peak = lookup_peak(str(facts.get("gpu_name", "")), setup.compute_dtype)
        if peak.tflops is not None:
            facts["peak_tflops"] = peak.tflops
    return facts


def cpu_cores_available() -> int:
    """Cores this process may run on: the affinity mask (containers and taskset shrink it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def optimizer_facts(optimizer: torch.optim.Optimizer) -> Facts:
    """Class and implementation. ``foreach=None`` is resolved as torch resolves it: multi-tensor
    kernels when every parameter is on a CUDA device and the fused path is off."""
    defaults = optimizer.defaults
    fused = bool(defaults.get("fused"))
    foreach = defaults.get("foreach")
    if foreach is None:
        every = [p for group in optimizer.param_groups for p in group["params"]]
        foreach = not fused and bool(every) and all(p.is_cuda for p in every)
    accepts = inspect.signature(type(optimizer).__init__).parameters
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    return {
        "optimizer_class": type(optimizer).__name__,
        "optimizer_fused": fused,
        "optimizer_foreach": bool(foreach),
        "optimizer_supports_fused": "fused" in accepts,
        "optimizer_param_count": float(sum(p.numel() for p in parameters)),
        "optimizer_param_tensors": float(len(parameters)),
    }


def dataloader_facts(loader: Any) -> Facts:
    """The DataLoader's settings; only ``dataloader_present`` when the workload exposes none."""
    from torch.utils.data import DataLoader

    if not isinstance(loader, DataLoader):
        return {"dataloader_present": False}
    facts: Facts = {
        "dataloader_present": True,
        "dataloader_num_workers": float(loader.num_workers),
        "dataloader_pin_memory": bool(loader.pin_memory),
        "dataloader_persistent_workers": bool(loader.persistent_workers),
    }
    if loader.num_workers > 0 and loader.prefetch_factor is not None:
        facts["dataloader_prefetch_factor"] = float(loader.prefetch_factor)
    return facts


def model_facts(model: torch.nn.Module, knobs: Mapping[str, KnobValue]) -> Facts:
    """Convolutions and their memory format, and whether the model is compiled."""
    import torch

    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    facts: Facts = {
        "conv_layer_count": float(len(convs)),
        "compiled": bool(knobs.get("compile")) or hasattr(model, "_orig_mod"),
    }
    # A 1x1 kernel's weight is contiguous in both formats and says nothing either way.
    telling = [
        m.weight
        for m in convs
        if m.weight.is_contiguous() != m.weight.is_contiguous(memory_format=torch.channels_last)
    ]
    if telling:
        facts["channels_last"] = all(
            w.is_contiguous(memory_format=torch.channels_last) for w in telling
        )
    return facts


def precision_facts(device: str, knobs: Mapping[str, KnobValue]) -> Facts:
    """Autocast (from the precision knob), the fp32 matmul precision, and CUDA's TF32/cuDNN."""
    import torch

    precision = torch.get_float32_matmul_precision()
    facts: Facts = {"float32_matmul_precision": precision}
    if "precision" in knobs:
        facts["autocast_enabled"] = knobs["precision"] in ("bf16", "fp16")
    if device == "cuda":
        major, minor = torch.cuda.get_device_capability()
        facts.update(
            {
                "gpu_name": torch.cuda.get_device_name(),
                "compute_capability": f"{major}.{minor}",
                "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32)
                or precision != "highest",
                "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            }
        )
    return facts


def distributed_facts(
    model: torch.nn.Module, knobs: Mapping[str, KnobValue], device: str = "cpu"
) -> Facts:
    """The process group, the data-parallel wrapper and its gradient buckets, the accumulation.

    ``world_size`` and ``dist_backend`` exist only inside an initialised process group and the
    wrapper only for a group or a wrapped model, so a single-process run gets none of them: the
    distributed rules then stay silent. ``DataParallel`` is single-process (no group, no world
    size). ``gpu_count`` is every CUDA run's, ``grad_accumulation_steps`` every workload's that
    has the ``grad_accumulation`` knob.
    """
    import torch

    facts: Facts = {}
    if device == "cuda":
        facts["gpu_count"] = float(torch.cuda.device_count())
    accumulation = knobs.get("grad_accumulation")
    if isinstance(accumulation, int | float) and not isinstance(accumulation, bool):
        facts["grad_accumulation_steps"] = float(accumulation)
    dist = torch.distributed
    initialised = dist.is_available() and dist.is_initialized()
    if initialised:
        facts["world_size"] = float(dist.get_world_size())
        facts["dist_backend"] = device_backend(str(dist.get_backend()), device)
    wrapper, wrapped = model_wrapper(model)
    if initialised or wrapper != "none":
        facts["model_wrapper"] = wrapper
    if isinstance(wrapped, torch.nn.parallel.DistributedDataParallel):
        facts["ddp_bucket_cap_mb"] = float(wrapped.bucket_bytes_cap) / 2**20
        facts["ddp_gradient_as_bucket_view"] = bool(wrapped.gradient_as_bucket_view)
    return facts


def device_backend(backend: str, device: str) -> str:
    """The backend a group uses for ``device``: a group made with ``backend=None`` (or
    ``"cpu:gloo,cuda:nccl"``) names one per device, and the GPU's is the one that matters."""
    if ":" not in backend:
        return backend
    pairs = dict(item.split(":", 1) for item in backend.split(",") if ":" in item)
    return pairs.get(device.split(":")[0], backend)


def model_wrapper(model: torch.nn.Module) -> tuple[str, torch.nn.Module]:
    """The data-parallel wrapper of ``model`` (looking through ``torch.compile``) and the
    wrapping module; ``("none", model)`` when there is none."""
    import torch

    candidates = [model]
    original = getattr(model, "_orig_mod", None)
    if isinstance(original, torch.nn.Module):
        candidates.append(original)
    for module in candidates:
        if isinstance(module, torch.nn.parallel.DistributedDataParallel):
            return "DistributedDataParallel", module
        if isinstance(module, torch.nn.DataParallel):
            return "DataParallel", module
        if _is_fsdp(module):
            return "FullyShardedDataParallel", module
    return "none", model


def _is_fsdp(module: torch.nn.Module) -> bool:
    """FSDP (the wrapper class, or FSDP2's ``fully_shard`` module class); a model can only be
    one once ``torch.distributed.fsdp`` is imported, so it is not imported here."""
    fsdp = sys.modules.get("torch.distributed.fsdp")
    classes = tuple(
        cls
        for cls in (
            getattr(fsdp, "FullyShardedDataParallel", None),
            getattr(fsdp, "FSDPModule", None),
        )
        if isinstance(cls, type)
    )
    return bool(classes) and isinstance(module, classes)


def memory_facts(device: str) -> Facts:
    """Peak use against what could be used: the GPU's memory, or RSS plus free host memory."""
    if device == "cuda":
        import torch

        peak = float(torch.cuda.max_memory_reserved())
        total = float(torch.cuda.mem_get_info()[1])
    else:
        import psutil

        peak = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        total = peak + float(psutil.virtual_memory().available)
    if total <= 0:
        return {}
    return {
        "memory_peak_bytes": peak,
        "memory_total_bytes": total,
        "memory_headroom_fraction": max(0.0, 1.0 - peak / total),
    }


class GcMonitor:
    """Times Python garbage collections through ``gc.callbacks`` while it is active.

    A collection of the young generation is microseconds, a full one over millions of objects
    can be tens of milliseconds in the middle of a step, which no op in the trace explains.
    """

    def __init__(self) -> None:
        self.collections = 0
        self.pause_s = 0.0
        self._started: float | None = None

    def start(self) -> None:
        """Begin timing collections."""
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        """Stop timing (idempotent, so a ``finally`` may call it after a normal stop)."""
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif phase == "stop" and self._started is not None:
            self.pause_s += time.perf_counter() - self._started
            self.collections += 1
            self._started = None

    def facts(self, steps: int) -> Facts:
        """Collections per step, and the pause per step for the parent to turn into a share."""
        return {
            "gc_collections": self.collections / steps,
            "gc_pause_ms_per_step": self.pause_s * 1000.0 / steps,
        }
