"""Record evidence documents for the GPU-only advice rules from real GPU profiler traces.

The rules that apply only on CUDA cannot be exercised on a CPU-only CI machine, so they are
tested on evidence recorded from traces of real GPU runs (recorded by others on A100, H100,
B200, V100 and MI300X machines; see ``tests/data/advise/README.md``). This script turns each
trace into one JSON document in ``tests/data/advise/evidence/``:

1. The trace is parsed by perfgate's own ``evidence_from_trace`` (the code ``perfgate advise``
   runs on a fresh profile), so a document is exactly what perfgate would see.
2. Facts a trace cannot record directly (autocast, TF32 switches, memory format, compile, the
   process group) are *inferred* from what the trace does record, by the functions below, each
   with its reason in ``_inferred``: fp32 inputs to every matmul mean no autocast, ``…sgemm…``
   kernels mean no TF32, ``nchwToNhwc`` kernels mean an NCHW model, the header's
   ``distributedInfo`` gives the world size and backend, and so on. The data-parallel wrapper is
   not inferred: no trace tells it apart reliably, so the rules that need it stay silent.
3. Facts no trace records at all (``cudnn.benchmark``; autocast in a bf16-weights model) are
   *assumed*, in ``_assumed`` with the reason; an assumption is always the one under which the
   rule in question could fire, so a rule that stays silent does so on recorded evidence.

Run from the repository root (the large traces are read from ``../shared/traces``)::

    python benchmarks/record_gpu_evidence.py            # rewrite every document
    python benchmarks/record_gpu_evidence.py --check    # exit 1 if a document is out of date

``tests/test_advise_gpu_rules.py`` re-records every document whose trace is present and
compares it with the committed one, so a document cannot drift from the parser.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.advise.catalogue import Evidence
from perfgate.advise.evidence import evidence_from_trace
from perfgate.advise.trace_evidence import trace_evidence
from perfgate.trace.facts import device_backend
from perfgate.trace.loader import load_document, parse_trace

REPO = Path(__file__).resolve().parent.parent
LOCAL = REPO / "tests" / "data" / "advise"
SHARED = REPO.parent / "shared" / "traces"
OUT = LOCAL / "evidence"
SCHEMA = "perfgate.recorded-evidence"
VERSION = 1

_LAYOUT_KERNELS = ("nchwtonhwc", "nhwctonchw", "batched_transpose")
_CONV_OPS = ("aten::conv2d",)
_COMPILED = ("Torch-Compiled Region", "CompiledFunction")
_AUTOCAST_WHY = (
    "not recorded; assumed off, the case in which the precision rules could fire "
    "(with bf16 weights the fp32 fraction keeps them silent either way)"
)


@dataclass(frozen=True, kw_only=True)
class Recording:
    """One trace and what must be said about it beyond what it records."""

    trace: str
    """File stem in ``tests/data/advise`` or ``../shared/traces``."""
    what: str
    step_region: str | None = None
    """For a trace without ``ProfilerStep#`` markers: the suffix of the annotation that spans
    the measured step; its outermost instance is marked as ``ProfilerStep#1``."""
    batch_from: tuple[str, int] | None = None
    """``(op, input)``: the batch size is the first dimension of that input of the first such
    op (the model's input)."""
    assumed: Mapping[str, tuple[bool | float | str, str]] = field(default_factory=dict)
    """Facts no trace records: name → (value, why)."""


RECORDINGS: tuple[Recording, ...] = (
    Recording(
        trace="a100-train-control",
        what="A100 training job: TF32 GEMMs (cutlass s1688), NCCL, FusedAdam, pinned batches",
    ),
    Recording(
        trace="a100-train-test",
        what="the same job changed (compiled, more copies), on GPUs the trace declares as V100",
    ),
    Recording(
        trace="v100-train",
        what="V100 fp32 convolution-net training with cuDNN and SGD",
        assumed={
            "cudnn_benchmark": (False, "not recorded in a trace; PyTorch's default"),
        },
    ),
    Recording(
        trace="a100-alexnet-forward",
        what="AlexNet forward on an A100 (fp32 SGEMM linears, TF32 cuDNN convolutions, NCHW)",
        step_region="|measure|forward]",
        assumed={
            "cudnn_benchmark": (False, "not recorded in a trace; PyTorch's default"),
        },
    ),
    Recording(
        trace="h100-owlv2-inference-bf16",
        what="OWLv2 bf16 inference on an H100: hand-written attention, host syncs",
        batch_from=("aten::conv2d", 0),
        assumed={
            "autocast_enabled": (False, _AUTOCAST_WHY),
            "cudnn_benchmark": (False, "not recorded in a trace; PyTorch's default"),
        },
    ),
    Recording(
        trace="h100-qwen-0.5b-inference-sdpa",
        what="Qwen 0.5B bf16 inference on an H100 through SDPA (flash)",
        batch_from=("aten::embedding", 1),
        assumed={"autocast_enabled": (False, _AUTOCAST_WHY)},
    ),
    Recording(
        trace="b200-vllm-eager",
        what="vLLM serving on a B200 in eager mode (some compiled regions, nvjet GEMMs)",
        assumed={"autocast_enabled": (False, _AUTOCAST_WHY)},
    ),
    Recording(
        trace="a100-train-nccl",
        what="rank 0 of a 2-rank NCCL DistributedDataParallel training job on A100s: fp32 "
        "(TF32) convolution net with cuDNN and SGD, all-reduces partly behind the backward",
        assumed={
            "cudnn_benchmark": (False, "not recorded in a trace; PyTorch's default"),
        },
    ),
    Recording(
        trace="mi300-resnet-train-checkpointing",
        what="ResNet bf16 training with activation checkpointing on an MI300X (ROCm)",
        assumed={
            "autocast_enabled": (False, _AUTOCAST_WHY),
            "cudnn_benchmark": (False, "not recorded in a trace; PyTorch's default"),
        },
    ),
)
"""Every recorded document; its file is ``<trace>.json`` in ``tests/data/advise/evidence``."""


def trace_path(name: str, shared: Path = SHARED) -> Path:
    """Where a trace lives: the project's own test data first, then the shared folder."""
    local = LOCAL / f"{name}.json.gz"
    return local if local.exists() else shared / f"{name}.json.gz"


def record(recording: Recording, path: Path) -> dict[str, Any]:
    """The evidence document of one trace (see the module docstring)."""
    trace = load_document(path)
    step = "its ProfilerStep# markers"
    if recording.step_region is not None:
        step = _mark_step(trace, recording.step_region)
    model = parse_trace(trace)
    facts, inferred = infer_facts(trace, trace_evidence(model), recording)
    facts.update({name: value for name, (value, _) in recording.assumed.items()})
    evidence = evidence_from_trace(model, facts)
    return {
        "schema": SCHEMA,
        "schema_version": VERSION,
        "trace": path.name,
        "trace_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "what": recording.what,
        "step": step,
        "recorded_with": "python benchmarks/record_gpu_evidence.py",
        "evidence": dict(sorted(evidence.items())),
        "_inferred": dict(sorted(inferred.items())),
        "_assumed": {name: why for name, (_, why) in sorted(recording.assumed.items())},
    }


def _mark_step(trace: dict[str, Any], suffix: str) -> str:
    regions = [
        event
        for event in trace["traceEvents"]
        if event.get("cat") == "user_annotation" and str(event.get("name", "")).endswith(suffix)
    ]
    if not regions:
        raise SystemExit(f"no annotation ending in {suffix!r} in the trace")
    outer = max(regions, key=lambda event: float(event["dur"]))
    original = str(outer["name"])
    outer["name"] = "ProfilerStep#1"
    return (
        f"the outermost {original!r} annotation, marked as ProfilerStep#1 (the rest of the "
        "trace is CUDA context creation and the cuDNN warm-up forward)"
    )


def infer_facts(
    trace: dict[str, Any], found: Evidence, recording: Recording
) -> tuple[dict[str, Any], dict[str, str]]:
    """Facts inferred from the trace's content, and the reason for each."""
    events = trace.get("traceEvents", [])
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    kernels = [str(e.get("name", "")) for e in events if e.get("cat") == "kernel"]
    facts: dict[str, Any] = {}
    why: dict[str, str] = {}
    fraction = found.get("fp32_matmul_fraction")
    unassumed = "autocast_enabled" not in recording.assumed
    if unassumed and isinstance(fraction, float) and fraction >= 0.99:
        facts["autocast_enabled"] = False
        why["autocast_enabled"] = (
            "every timed matmul and convolution had fp32 inputs; under autocast they "
            "would have been bf16 or fp16"
        )
    capability = found.get("compute_capability")
    ampere = isinstance(capability, str) and float(capability) >= 8.0  # TF32 exists from 8.0
    if ampere and found.get("matmul_dtype") in ("fp32", "tf32"):
        tf32 = found["matmul_dtype"] == "tf32"
        facts["tf32_matmul"] = tf32
        why["tf32_matmul"] = (
            "fp32 matmuls ran on TF32 tensor-op kernels (s1688/tf32 in their names)"
            if tf32
            else "fp32 matmuls ran on plain SGEMM kernels: TF32 was off for matmuls"
        )
    convs = [e for e in ops if e.get("name") in _CONV_OPS]
    if convs:
        steps = found.get("profiled_steps")
        per_step = len(convs) / float(steps) if isinstance(steps, float) and steps else len(convs)
        facts["conv_layer_count"] = float(round(per_step))
        why["conv_layer_count"] = "aten::conv2d calls per profiled step (recomputed ones too)"
        layout = [k for k in kernels if any(n in k.lower() for n in _LAYOUT_KERNELS)]
        if layout:
            facts["channels_last"] = False
            why["channels_last"] = (
                f"{len(layout)} layout-conversion kernels ({layout[0][:40]}…): the library "
                "transposed NCHW tensors for its NHWC kernels"
            )
    compiled = [e for e in events if any(m in str(e.get("name", "")) for m in _COMPILED)]
    if compiled:
        facts["compiled"] = True
        why["compiled"] = f"{len(compiled)} compiled-region events ({compiled[0]['name'][:40]})"
    elif ops:
        facts["compiled"] = False
        why["compiled"] = f"no compiled region among the trace's {len(ops)} ops"
    facts.update(_memory(trace, why))
    facts.update(_process_group(trace, why))
    if recording.batch_from is not None:
        op, position = recording.batch_from
        first = next(e for e in sorted(ops, key=lambda e: e["ts"]) if e.get("name") == op)
        dims = first["args"]["Input Dims"][position]
        facts["batch_size"] = float(dims[0])
        why["batch_size"] = f"first dimension of the first {op}'s input {position}: {dims}"
    return facts, why


def _memory(trace: dict[str, Any], why: dict[str, str]) -> dict[str, float]:
    """Peak reserved CUDA memory from ``[memory]`` events (``profile_memory=True``)."""
    events = trace.get("traceEvents", [])
    reserved = [
        (e["args"].get("Device Id"), float(e["args"].get("Total Reserved", 0)))
        for e in events
        if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type") == 1
    ]
    if not reserved:
        return {}
    device, peak = max(reserved, key=lambda item: item[1])
    totals = {p.get("id"): p.get("totalGlobalMem") for p in trace.get("deviceProperties", [])}
    total = totals.get(device)
    if not isinstance(total, int | float) or total <= 0:
        return {}
    why["memory_peak_bytes"] = f"largest 'Total Reserved' of the [memory] events on GPU {device}"
    why["memory_total_bytes"] = f"totalGlobalMem of GPU {device} in deviceProperties"
    why["memory_headroom_fraction"] = "1 - peak / total"
    return {
        "memory_peak_bytes": peak,
        "memory_total_bytes": float(total),
        "memory_headroom_fraction": max(0.0, 1.0 - peak / total),
    }


def _process_group(trace: dict[str, Any], why: dict[str, str]) -> dict[str, Any]:
    """World size and backend from the header's ``distributedInfo`` (Kineto writes the default
    process group's there when one is initialised); a header without them gives neither."""
    info = trace.get("distributedInfo")
    if not isinstance(info, dict):
        return {}
    facts: dict[str, Any] = {}
    size = info.get("world_size")
    if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
        facts["world_size"] = float(size)
        why["world_size"] = f"distributedInfo in the trace header: world_size {size}"
    backend = info.get("backend")
    if isinstance(backend, str) and backend:
        facts["dist_backend"] = device_backend(backend, "cuda")  # a GPU trace: the CUDA one
        why["dist_backend"] = f"distributedInfo in the trace header: backend {backend!r}"
    return facts


def document_path(recording: Recording, out: Path = OUT) -> Path:
    """Where the document of ``recording`` is kept."""
    return out / f"{recording.trace}.json"


def render(document: Mapping[str, Any]) -> str:
    """The document as committed: keys in the order written, two-space indent, a final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="folder of the large traces")
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the documents")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    stale = 0
    for recording in RECORDINGS:
        path = trace_path(recording.trace, args.shared)
        target = document_path(recording, args.out)
        if not path.exists():
            print(f"{recording.trace}: trace not found at {path}, document kept")
            continue
        text = render(record(recording, path))
        if args.check:
            current = target.read_text() if target.exists() else ""
            stale += current != text
            print(f"{recording.trace}: {'up to date' if current == text else 'OUT OF DATE'}")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            print(f"{recording.trace}: wrote {target.relative_to(REPO)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
