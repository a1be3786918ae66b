"""Workload definitions and their definition hash.

A definition names a factory (``module:function``), its presets and the knobs it honours. The
definition hash identifies *what was measured*: it covers the workload's name and version, the
source files of its code, the preset parameters and the resolved knob values. Baselines are keyed
by it, so any change to the code or config of a workload starts a new series instead of being
compared against numbers from a different program.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from perfgate.errors import UsageError
from perfgate.workloads.knobs import KnobSpec
from perfgate.workloads.protocol import KnobValue


@dataclass(frozen=True, kw_only=True)
class WorkloadDefinition:
    """Everything needed to build, identify and describe one workload."""

    name: str
    """Unique name within a run (``gpt``, ``resnet``, or a user's own)."""
    version: int
    """Bumped by hand when the workload's meaning changes (the hash catches the rest)."""
    kind: Literal["builtin", "user"]
    factory: str
    """``module:function`` imported and called inside each worker process."""
    description: str
    presets: Mapping[str, Mapping[str, Any]]
    """Preset name → parameters handed to the factory as ``ctx.params``."""
    knobs: Mapping[str, KnobSpec]
    """The knobs this workload honours."""
    source_files: tuple[Path, ...]
    """Files whose bytes enter the definition hash (the workload's own code)."""
    python_path: tuple[str, ...] = field(default=())
    """Extra ``sys.path`` entries for the worker (a user project's root)."""
    default_knobs: Mapping[str, KnobValue] = field(default_factory=dict)
    """Knob values set in configuration, applied under any ``--knob`` overrides."""
    distributed: bool = False
    """Trains under ``torch.distributed``: every repeat is a torchrun of
    ``--nproc-per-node`` ranks (1 by default), each handed the process group."""
    script: tuple[str, ...] = ()
    """A training-script workload: the script's absolute path, then its arguments (``factory``
    then reads ``script:PATH``, the path as configured); empty for a factory workload."""

    def preset_params(self, preset: str) -> Mapping[str, Any]:
        """The parameters of ``preset``, or a usage error naming the presets that exist."""
        try:
            return self.presets[preset]
        except KeyError:
            raise UsageError(
                f"workload {self.name} has no preset {preset!r}",
                f"use one of: {', '.join(sorted(self.presets))}",
            ) from None

    def definition_hash(self, preset: str, knobs: Mapping[str, KnobValue]) -> str:
        """SHA-256 over name, version, factory, source bytes, preset parameters and knobs."""
        digest = hashlib.sha256()
        header = {
            "name": self.name,
            "version": self.version,
            "factory": self.factory,
            **({"script_args": list(self.script[1:])} if self.script else {}),
            "preset": preset,
            "params": self.preset_params(preset),
            "knobs": dict(knobs),
        }
        digest.update(json.dumps(header, sort_keys=True, default=str).encode())
        for path in sorted(self.source_files, key=lambda p: (p.name, str(p))):
            digest.update(path.name.encode())
            digest.update(b"\0")
            digest.update(path.read_bytes())
        return digest.hexdigest()
