"""The catalog of built-in workloads and the suites that run them: definitions only.

Each built-in's model and ``build(ctx)`` live in ``perfgate/workloads/<name>.py``, which imports
torch; the definitions (presets, knobs, the files whose bytes enter the definition hash) live
here and import nothing heavy, so planning a run, listing workloads or printing ``--help`` never
pays for importing torch (1-2 s). The worker imports the factory module named by ``factory``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.workloads.definition import WorkloadDefinition
from perfgate.workloads.knobs import STANDARD_KNOBS

_HERE = Path(__file__).resolve().parent


def _builtin(
    *,
    name: str,
    description: str,
    presets: Mapping[str, Mapping[str, Any]],
    knob_names: Sequence[str],
    version: int = 1,
    extra_modules: Sequence[str] = (),
    distributed: bool = False,
) -> WorkloadDefinition:
    """The definition of the built-in living in ``perfgate/workloads/<name>.py``.

    Its hash covers the module's own source and ``common.py``: a change to the shared step or to
    the knob handling changes what every built-in measures. ``extra_modules`` are other built-ins
    it builds on (``ddp`` trains the ``gpt`` and ``resnet`` models).
    """
    return WorkloadDefinition(
        name=name,
        version=version,
        kind="builtin",
        factory=f"perfgate.workloads.{name}:build",
        description=description,
        presets=presets,
        knobs={knob: STANDARD_KNOBS[knob] for knob in knob_names},
        source_files=(
            _HERE / f"{name}.py",
            _HERE / "common.py",
            *(_HERE / f"{module}.py" for module in extra_modules),
        ),
        distributed=distributed,
    )


_GPT = _builtin(
    name="gpt",
    description="GPT-2-style decoder-only transformer LM (causal self-attention) on synthetic "
    "tokens; full = GPT-2 small, 124M parameters, sequence 1024.",
    presets={
        "smoke": {
            "vocab_size": 256,
            "seq_len": 64,
            "n_layer": 2,
            "n_head": 4,
            "n_embd": 64,
            "batch_size": 8,
            "lr": 1e-3,
        },
        "full": {
            "vocab_size": 50304,
            "seq_len": 1024,
            "n_layer": 12,
            "n_head": 12,
            "n_embd": 768,
            "batch_size": 16,
            "lr": 6e-4,
        },
    },
    knob_names=("precision", "compile", "attention", "optimizer", "batch_size", "non_contiguous"),
)


_RESNET = _builtin(
    name="resnet",
    description="ResNet image classifier (basic blocks, BatchNorm) on synthetic images; "
    "full = ResNet-18 at 224x224, batch 128.",
    presets={
        "smoke": {
            "image_size": 32,
            "widths": [8, 16, 32],
            "blocks": [1, 1, 1],
            "stem": "cifar",
            "num_classes": 10,
            "batch_size": 16,
            "lr": 1e-3,
        },
        "full": {
            "image_size": 224,
            "widths": [64, 128, 256, 512],
            "blocks": [2, 2, 2, 2],
            "stem": "imagenet",
            "num_classes": 1000,
            "batch_size": 128,
            "lr": 1e-3,
        },
    },
    knob_names=(
        "precision",
        "compile",
        "optimizer",
        "channels_last",
        "batch_size",
        "non_contiguous",
    ),
)


_MLP = _builtin(
    name="mlp",
    description="Wide MLP classifier (Linear+GELU layers, cross-entropy) on synthetic features; "
    "cpu-large = 1024-wide at batch 1024 (16 GFLOP a step: matmuls dominate a CPU step); "
    "full = 8192-wide hidden layers.",
    presets={
        "smoke": {
            "in_features": 64,
            "hidden": 128,
            "depth": 3,
            "num_classes": 10,
            "batch_size": 64,
            "lr": 1e-3,
        },
        "cpu-large": {
            "in_features": 512,
            "hidden": 1024,
            "depth": 3,
            "num_classes": 10,
            "batch_size": 1024,
            "lr": 1e-3,
        },
        "full": {
            "in_features": 1024,
            "hidden": 8192,
            "depth": 4,
            "num_classes": 1000,
            "batch_size": 4096,
            "lr": 1e-4,
        },
    },
    knob_names=("precision", "compile", "optimizer", "batch_size", "non_contiguous"),
)


_DATAPIPE = _builtin(
    name="datapipe",
    description="Small CNN trained through a DataLoader with heavy per-sample CPU preprocessing; "
    "measures the input pipeline (num_workers, pin_memory). balanced = full's data with a 2x "
    "wider model, whose step on one core outlasts one worker's batch (0.34 s against 0.5 s on "
    "a 2.8 GHz Xeon core): input-bound without workers, fed by one.",
    presets={
        "smoke": {
            "image_size": 32,
            "crop_margin": 8,
            "decode_scale": 2,
            "blur_passes": 12,
            "widths": [8, 16],
            "num_classes": 10,
            "batch_size": 8,
            "epoch_batches": 1000,
            "lr": 1e-3,
        },
        "balanced": {
            "image_size": 64,
            "crop_margin": 8,
            "decode_scale": 1,
            "blur_passes": 2,
            "widths": [64, 128, 256],
            "num_classes": 100,
            "batch_size": 128,
            "epoch_batches": 1000,
            "lr": 1e-3,
        },
        "full": {
            "image_size": 64,
            "crop_margin": 8,
            "decode_scale": 1,
            "blur_passes": 2,
            "widths": [32, 64, 128],
            "num_classes": 100,
            "batch_size": 128,
            "epoch_batches": 1000,
            "lr": 1e-3,
        },
    },
    knob_names=("num_workers", "pin_memory", "precision", "compile", "optimizer", "batch_size"),
)


_DDP = _builtin(
    name="ddp",
    description="DistributedDataParallel over the gpt (smoke, full) or resnet (resnet-smoke, "
    "resnet-full) model, one shard of a synthetic dataset per rank; run with --nproc-per-node.",
    presets={
        "smoke": {"model": "gpt", **_GPT.presets["smoke"]},
        "full": {"model": "gpt", **_GPT.presets["full"]},
        "resnet-smoke": {"model": "resnet", **_RESNET.presets["smoke"]},
        "resnet-full": {"model": "resnet", **_RESNET.presets["full"]},
    },
    knob_names=(
        "precision",
        "compile",
        "optimizer",
        "batch_size",
        "backend",
        "bucket_cap_mb",
        "gradient_as_bucket_view",
        "grad_accumulation",
        "uneven_batches",
    ),
    extra_modules=("gpt", "resnet"),
    distributed=True,
)


BUILTIN_WORKLOADS: dict[str, WorkloadDefinition] = {
    definition.name: definition for definition in (_GPT, _RESNET, _MLP, _DATAPIPE, _DDP)
}
"""Built-in workload name → definition (``gpt``, ``resnet``, ``mlp``, ``datapipe``, ``ddp``)."""

SINGLE_PROCESS = tuple(name for name, d in BUILTIN_WORKLOADS.items() if not d.distributed)

SUITES: dict[str, tuple[tuple[str, str], ...]] = {
    **{preset: tuple((name, preset) for name in SINGLE_PROCESS) for preset in ("smoke", "full")},
    "distributed": (("ddp", "smoke"), ("ddp", "resnet-smoke")),
}
"""Suite name → ``(workload, preset)`` pairs: ``smoke`` is seconds on a CPU (CI, plumbing
checks), ``full`` is sized for a datacenter GPU; both single-process. ``distributed`` runs the
``ddp`` workload over both models (with ``--nproc-per-node``, one process group per repeat)."""
