"""Knobs: the switches the advisor flips to prove a piece of advice.

Each knob has a name, a type, a default and (for enumerations) its allowed values. A workload
declares which knobs it honours; setting one it does not honour is a usage error rather than a
silent no-op, because a "verified" fix that changed nothing would be a lie.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from perfgate.errors import UsageError
from perfgate.workloads.protocol import KnobValue

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class KnobSpec:
    """One knob: its type, default and allowed values."""

    name: str
    kind: type
    default: KnobValue
    doc: str
    choices: tuple[str, ...] | None = None
    nullable: bool = False

    def coerce(self, raw: object) -> KnobValue:
        """Validate ``raw`` (a CLI string or a TOML value) and return it in the knob's type."""
        if raw is None or (isinstance(raw, str) and raw.lower() in {"none", "null", "default"}):
            if self.nullable:
                return None
            raise UsageError(f"knob {self.name} cannot be empty", f"give one of {self._allowed()}")
        if self.kind is bool:
            return self._coerce_bool(raw)
        if self.kind is int:
            return self._coerce_int(raw)
        value = str(raw)
        if self.choices is not None and value not in self.choices:
            raise UsageError(
                f"knob {self.name}={value!r} is not allowed", f"use one of {self._allowed()}"
            )
        return value

    def _coerce_bool(self, raw: object) -> bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise UsageError(f"knob {self.name}={raw!r} is not a boolean", "use true or false")

    def _coerce_int(self, raw: object) -> int:
        if isinstance(raw, bool):
            raise UsageError(f"knob {self.name}={raw!r} is not an integer", "give a whole number")
        try:
            value = int(str(raw))
        except ValueError:
            raise UsageError(
                f"knob {self.name}={raw!r} is not an integer", "give a whole number"
            ) from None
        if value < 0:
            raise UsageError(f"knob {self.name}={value} is negative", "give a number >= 0")
        return value

    def _allowed(self) -> str:
        if self.kind is bool:
            return "true/false"
        if self.kind is int:
            return "a whole number"
        return ", ".join(self.choices or ())


STANDARD_KNOBS: dict[str, KnobSpec] = {
    spec.name: spec
    for spec in (
        KnobSpec(
            "precision",
            str,
            "off",
            "mixed precision via autocast (fp16 adds a GradScaler)",
            choices=("off", "bf16", "fp16"),
        ),
        KnobSpec("compile", bool, False, "wrap the model in torch.compile"),
        KnobSpec(
            "attention",
            str,
            "sdpa",
            "attention kernel: F.scaled_dot_product_attention or manual matmul-softmax-matmul",
            choices=("sdpa", "manual"),
        ),
        KnobSpec(
            "optimizer",
            str,
            "foreach",
            "optimizer implementation (AdamW)",
            choices=("plain", "foreach", "fused"),
        ),
        KnobSpec("channels_last", bool, False, "NHWC memory format for convolution nets"),
        KnobSpec("num_workers", int, 0, "DataLoader worker processes"),
        KnobSpec("pin_memory", bool, False, "DataLoader pinned host memory"),
        KnobSpec(
            "batch_size", int, None, "samples per step (default: the preset's)", nullable=True
        ),
        KnobSpec(
            "non_contiguous",
            bool,
            False,
            "deliberately non-contiguous activations (transposed views copied each step)",
        ),
        KnobSpec(
            "backend",
            str,
            "auto",
            "torch.distributed backend (auto: nccl on GPUs, gloo on CPU)",
            choices=("auto", "gloo", "nccl"),
        ),
        KnobSpec("bucket_cap_mb", int, 25, "DDP gradient bucket size in MiB (DDP's default 25)"),
        KnobSpec(
            "gradient_as_bucket_view",
            bool,
            False,
            "DDP gradients as views into the all-reduce buckets (saves a copy per bucket)",
        ),
        KnobSpec(
            "grad_accumulation",
            int,
            1,
            "micro-batches per optimizer step, all but the last under DDP's no_sync()",
        ),
        KnobSpec(
            "uneven_batches",
            bool,
            False,
            "the last rank gets four times the batch: a planted load imbalance",
        ),
    )
}


def parse_knob_assignments(items: Iterable[str]) -> dict[str, dict[str, str]]:
    """Parse ``--knob`` values: ``KEY=VALUE`` (all workloads) or ``WORKLOAD.KEY=VALUE``.

    Returns ``{scope: {key: raw_value}}`` with ``"*"`` as the scope of unqualified knobs.
    """
    parsed: dict[str, dict[str, str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"--knob {item!r} is not KEY=VALUE", "write e.g. --knob precision=bf16"
            )
        scope, dot, name = key.strip().rpartition(".")
        parsed.setdefault(scope if dot else "*", {})[name] = value.strip()
    return parsed


def resolve_knobs(
    workload: str,
    specs: Mapping[str, KnobSpec],
    overrides: Mapping[str, object],
) -> dict[str, KnobValue]:
    """Defaults of every knob the workload honours, with ``overrides`` validated and applied."""
    unknown = sorted(set(overrides) - set(specs))
    if unknown:
        raise UsageError(
            f"workload {workload} has no knob {', '.join(unknown)}",
            f"its knobs are: {', '.join(sorted(specs)) or 'none'}",
        )
    resolved: dict[str, KnobValue] = {name: spec.default for name, spec in specs.items()}
    for name, raw in overrides.items():
        resolved[name] = specs[name].coerce(raw)
    return dict(sorted(resolved.items()))
