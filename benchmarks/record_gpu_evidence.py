"""Record evidence documents for the GPU-only advice rules from real GPU profiler traces.

The rules that apply only on CUDA cannot be exercised on a CPU-only CI machine, so they are
tested on evidence recorded from traces of real GPU runs (recorded by others on A100, H100,
B200, V100 and MI300X machines; see ``tests/data/advise/README.md``). This script turns each
trace into one JSON document in ``tests/data/advise/evidence/``:

1. The trace is parsed by perfgate's own ``evidence_from_trace`` (the code ``perfgate advise``
   runs on a fresh profile), so a document is exactly what perfgate would see.
2. Facts a trace cannot record directly (autocast, TF32 switches, memory format, compile, the
   process group, the batch) are *inferred* from what the trace does record by perfgate itself
   (``perfgate.trace.inference``, what ``perfgate advise --trace`` reads), each with its
   reason in ``_inferred``: fp32 inputs to every matmul mean no autocast, ``…sgemm…`` kernels
   mean no TF32, ``nchwToNhwc`` kernels mean an NCHW model, the header's ``distributedInfo``
   gives the world size and backend, and so on.
3. Facts no trace records at all (``cudnn.benchmark``, which perfgate assumes at PyTorch's
   default; autocast in a bf16-weights model, assumed here) are *assumed*, in ``_assumed`` with
   the reason; an assumption is always the one under which the rule in question could fire, so
   a rule that stays silent does so on recorded evidence.

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
from perfgate.trace import inference
from perfgate.trace.loader import load_document, parse_trace
from perfgate.trace.model import Trace
from perfgate.trace.timeline import build_timeline

REPO = Path(__file__).resolve().parent.parent
LOCAL = REPO / "tests" / "data" / "advise"
SHARED = REPO.parent / "shared" / "traces"
OUT = LOCAL / "evidence"
SCHEMA = "perfgate.recorded-evidence"
VERSION = 1

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
    step_annotation: str | None = None
    """For a trace without ``ProfilerStep#`` markers: the range that spans the measured step
    (``perfgate advise --step-annotation``)."""
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
        assumed={},
    ),
    Recording(
        trace="a100-alexnet-forward",
        what="AlexNet forward on an A100 (fp32 SGEMM linears, TF32 cuDNN convolutions, NCHW)",
        step_annotation="[param|pytorch.model.alex_net|0|0|0|measure|forward]",
        assumed={},
    ),
    Recording(
        trace="h100-owlv2-inference-bf16",
        what="OWLv2 bf16 inference on an H100: hand-written attention, host syncs",
        assumed={
            "autocast_enabled": (False, _AUTOCAST_WHY),
        },
    ),
    Recording(
        trace="h100-qwen-0.5b-inference-sdpa",
        what="Qwen 0.5B bf16 inference on an H100 through SDPA (flash)",
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
        assumed={},
    ),
    Recording(
        trace="mi300-resnet-train-checkpointing",
        what="ResNet bf16 training with activation checkpointing on an MI300X (ROCm)",
        assumed={
            "autocast_enabled": (False, _AUTOCAST_WHY),
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
    model = parse_trace(load_document(path), recording.step_annotation)
    step = "its ProfilerStep# markers"
    if recording.step_annotation is not None:
        step = f"the outermost {recording.step_annotation!r} range (--step-annotation)"
    facts, inferred, assumed = infer_facts(model, trace_evidence(model), recording)
    facts.update({name: value for name, (value, _) in recording.assumed.items()})
    assumed.update({name: why for name, (_, why) in recording.assumed.items()})
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
        "_assumed": dict(sorted(assumed.items())),
    }


def infer_facts(
    model: Trace, found: Evidence, recording: Recording
) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """Facts perfgate itself reads from the trace's content (``perfgate.trace.inference``, what
    ``perfgate advise --trace`` reads): the values, the reasons of the inferred ones and of the
    assumed ones; a fact the recording assumes is left to it."""
    facts: dict[str, Any] = {}
    inferred: dict[str, str] = {}
    assumed: dict[str, str] = {}
    for fact in inference.infer_facts(build_timeline(model), found):
        if fact.name in recording.assumed:
            continue
        facts[fact.name] = fact.value
        (assumed if fact.assumed else inferred)[fact.name] = fact.reason
    return facts, inferred, assumed


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
