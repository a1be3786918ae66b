"""Planted defects: each built-in workload as an *inefficient* and a *tuned* variant.

An advisor can only be trusted on defects whose presence is known. This catalogue plants them:
every variant pair is a workload and two sets of knob values, one that plants named defects
(hand-written attention, fp32, an unfused optimizer, a DataLoader without workers, needless
copies, a full garbage collection and a ``.item()`` in every step) and one that fixes them, with
the rules each defect must trigger. ``tests/test_advise_planted.py`` profiles both sides of every
pair on the CPU and scores the rules' precision and recall against it; ``benchmarks/gpu_check.sh``
advises the inefficient side on a GPU.

A defect is *present* in a variant whose knobs include every value that plants it, so presence
is computed, never asserted by hand, and a defect may be present on both sides (no knob fixes
it) or only on the tuned one (fixing one defect exposes another: enough DataLoader workers to
fill the cores show that the preprocessing itself is too heavy).

Two things no standard knob can plant, a collection per step and a host sync per step, are
planted by ``host_defects``, a workload factory wrapping a built-in (declared as the user
workload ``resnet-host`` by ``variant_config``): adding knobs to the built-ins would change their
knob sets, which their own tests pin.

A test and benchmark harness, not part of perfgate: the tests import it with ``benchmarks/`` on
their path, ``gpu_check.py`` from beside it. ``variant_config`` copies this file into the
project folder it is given, as a user project would hold its workload module, so that the
profiling workers (which see the project folder, not ``benchmarks/``) can import the factory.
"""

from __future__ import annotations

import gc
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from perfgate.config import Config, UserWorkloadConfig
from perfgate.errors import UsageError
from perfgate.trace.facts import cpu_cores_available
from perfgate.workloads.builtin import BUILTIN_WORKLOADS
from perfgate.workloads.protocol import KnobValue, TrainingSetup, WorkloadContext
from perfgate.workloads.setup import load_factory

MODULE = "planted"
"""This module's name in a project folder that ``variant_config`` set up."""

Side = Literal["inefficient", "tuned"]
SIDES: tuple[Side, ...] = ("inefficient", "tuned")

HOST_WORKLOAD = "resnet-host"
"""The user workload that plants the host-side defects, built on ``HOST_BASE``."""
HOST_BASE = "resnet"
"""A base with steps of 10 ms or more on a CPU: a collection over a frozen heap (about 0.1 ms)
then stays under the 1 % the gc-pauses rule calls material."""
HOST_KNOBS: dict[str, bool] = {
    "gc_collect_every_step": False,
    "gc_freeze": False,
    "item_every_step": False,
}
"""Knobs of ``host_defects`` with their defaults (all off: the base workload unchanged)."""


@dataclass(frozen=True, kw_only=True)
class Defect:
    """One planted defect and the advice it must draw."""

    name: str
    """What is wrong, in a phrase a report can show."""
    planted: Mapping[str, KnobValue]
    """Knob values that plant it: it is present in a variant whose knobs include all of them."""
    rules: tuple[str, ...]
    """Rule ids that must fire where it is present, on every device where the rule applies
    (a rule for CUDA only is expected there and nowhere else)."""
    also: tuple[str, ...] = ()
    """Rule ids it may draw too, because the defect really causes what they measure (the head
    split of hand-written attention copies q, k and v): neither required nor a false alarm."""
    note: str = ""
    """Why it is planted this way, where that is not obvious."""


@dataclass(frozen=True, kw_only=True)
class VariantPair:
    """A workload in two variants: one planting ``defects``, one fixing what knobs can fix."""

    workload: str
    """Workload name as selected (``gpt``, or ``resnet-host`` from ``variant_config``)."""
    inefficient: Mapping[str, KnobValue]
    tuned: Mapping[str, KnobValue]
    defects: tuple[Defect, ...]
    note: str = ""
    """Choices that apply to both sides (a batch size, a knob set for both), and why."""
    knob_names: frozenset[str] = field(default=frozenset())
    """The knobs the workload honours; when given, every knob named here must be one of them."""

    def __post_init__(self) -> None:
        named = {
            *self.inefficient,
            *self.tuned,
            *(knob for defect in self.defects for knob in defect.planted),
        }
        unknown = sorted(named - self.knob_names) if self.knob_names else []
        if unknown:
            raise UsageError(
                f"variant of {self.workload} names knobs it does not honour: {', '.join(unknown)}",
                f"its knobs are {', '.join(sorted(self.knob_names))}",
            )
        for defect in self.defects:
            if not any(self._has(side, defect) for side in SIDES):
                raise UsageError(
                    f"defect {defect.name!r} of {self.workload} is planted in neither variant",
                    "make one side's knobs include every value in its planted",
                )

    def knobs(self, side: Side) -> Mapping[str, KnobValue]:
        """The knob values of one side."""
        return self.inefficient if side == "inefficient" else self.tuned

    def present(self, side: Side) -> tuple[Defect, ...]:
        """The defects present in one side."""
        return tuple(defect for defect in self.defects if self._has(side, defect))

    def expected_rules(self, side: Side, applicable: Collection[str]) -> frozenset[str]:
        """Rules that must fire on one side, among ``applicable`` (those that can apply on the
        device at hand); any other of them firing there is a false positive."""
        return frozenset(
            rule for defect in self.present(side) for rule in defect.rules if rule in applicable
        )

    def tolerated_rules(self, side: Side) -> frozenset[str]:
        """Rules a present defect may also draw on one side (its ``also``)."""
        return frozenset(rule for defect in self.present(side) for rule in defect.also)

    def _has(self, side: Side, defect: Defect) -> bool:
        knobs = self.knobs(side)
        return all(name in knobs and knobs[name] == value for name, value in defect.planted.items())


FP32 = Defect(
    name="fp32 matmuls (no autocast, no TF32)",
    planted={"precision": "off"},
    rules=("bf16-autocast-missing",),
    note="only GPU evidence can show it: on a CPU fp32 is the fast path",
)
EAGER = Defect(
    name="eager elementwise chains (not compiled)",
    planted={"compile": False},
    rules=("compile-elementwise-fusion",),
)
UNFUSED_OPTIMIZER = Defect(
    name="per-parameter optimizer loop",
    planted={"optimizer": "plain"},
    rules=("optimizer-not-fused",),
)


def variant_pairs(device: str = "cpu", cores: int | None = None) -> tuple[VariantPair, ...]:
    """The catalogue for ``device`` on a machine with ``cores`` usable CPU cores (default:
    this process's).

    ``cores`` sets the tuned DataLoader's workers (filling the cores, as the starvation rule
    asks); ``device`` decides the knobs only a GPU honours (pinned memory). Every tuned side is
    fully tuned, not just free of its planted defects: otherwise the next bottleneck draws advice
    that no defect here explains, which the precision score counts against the rules.
    """
    cores = cpu_cores_available() if cores is None else cores

    def knobs_of(name: str) -> frozenset[str]:
        if name == HOST_WORKLOAD:
            return frozenset(BUILTIN_WORKLOADS[HOST_BASE].knobs) | frozenset(HOST_KNOBS)
        return frozenset(BUILTIN_WORKLOADS[name].knobs)

    cuda = device == "cuda"
    resnet_tuned: dict[str, KnobValue] = {
        "channels_last": True,
        "non_contiguous": False,
        "optimizer": "fused",
        "precision": "bf16",
        "compile": True,
        "batch_size": 48,
    }
    return (
        VariantPair(
            workload="gpt",
            inefficient={
                "attention": "manual",
                "optimizer": "plain",
                "precision": "off",
                "compile": False,
            },
            tuned={"attention": "sdpa", "optimizer": "fused", "precision": "bf16", "compile": True},
            defects=(
                Defect(
                    name="hand-written attention",
                    planted={"attention": "manual"},
                    rules=("manual-attention",),
                    also=("non-contiguous-copies",),
                    note="its transposed heads are copied before each matmul: 3-5 % of a CPU "
                    "step, around the copy rule's 5 %, and gone with SDPA (under 1 %)",
                ),
                UNFUSED_OPTIMIZER,
                EAGER,
                replace(FP32, rules=("bf16-autocast-missing", "tf32-disabled")),
            ),
            knob_names=knobs_of("gpt"),
        ),
        VariantPair(
            workload="resnet",
            inefficient={
                "channels_last": False,
                "non_contiguous": True,
                "optimizer": "fused",
                "precision": "off",
                "compile": False,
                "batch_size": 48,
            },
            tuned=resnet_tuned,
            defects=(
                Defect(
                    name="NCHW convolutions",
                    planted={"channels_last": False},
                    rules=("channels-last-conv",),
                ),
                Defect(
                    name="needless .contiguous() round trips between stages",
                    planted={"non_contiguous": True},
                    rules=("non-contiguous-copies",),
                ),
                EAGER,
                FP32,
            ),
            note="batch 48 and a fused optimizer on both sides: at the preset's 16 the "
            "elementwise chains are 16 % of the step, on the compile rule's 15 %; at 48 they "
            "are 19 %, and the optimizer, 3 % of a 48-image step, on the optimizer rule's "
            "threshold, is left out of the planted defects",
            knob_names=knobs_of("resnet"),
        ),
        VariantPair(
            workload="mlp",
            inefficient={
                "optimizer": "plain",
                "compile": False,
                "precision": "off",
                "batch_size": 128,
            },
            tuned={"optimizer": "fused", "compile": True, "precision": "bf16", "batch_size": 128},
            defects=(
                UNFUSED_OPTIMIZER,
                EAGER,
                replace(FP32, rules=("bf16-autocast-missing", "tf32-disabled")),
            ),
            note="batch 128 on both sides: at the preset's 64 the elementwise chains are 15-16 % "
            "of the step, on the rule's threshold; at 128, 19-22 % (at 256 addmm's copy of the "
            "broadcast bias into its output reaches 6 %, copy advice no planted defect explains)",
            knob_names=knobs_of("mlp"),
        ),
        VariantPair(
            workload="datapipe",
            inefficient={"num_workers": 0, "optimizer": "fused", "pin_memory": False},
            tuned={"num_workers": cores, "optimizer": "fused", "pin_memory": cuda, "compile": True},
            defects=(
                Defect(
                    name="heavy preprocessing in the main process (num_workers=0)",
                    planted={"num_workers": 0},
                    rules=("dataloader-starvation",),
                ),
                Defect(
                    name="preprocessing heavier than all the cores can feed",
                    planted={"num_workers": cores},
                    rules=("dataloader-cpu-saturated",),
                    note="the preset's cost per sample; no knob makes it cheaper, and it shows "
                    "only once workers fill the cores (before, the fix is more workers)",
                ),
                Defect(
                    name="batches copied to the GPU from pageable memory",
                    planted={"pin_memory": False},
                    rules=("pageable-h2d-copies",),
                    note="pinned memory is refused on a CPU run: there it is on both sides",
                ),
            ),
            note="fused optimizer on both sides: with workers the optimizer is 8 % of the "
            "step, and an unfused one would draw advice no planted defect explains; the tuned "
            "side is compiled too: with its workers filling both cores the main process's "
            "elementwise share went from 6 % to over the compile rule's 12 % in a CI run",
            knob_names=knobs_of("datapipe"),
        ),
        VariantPair(
            workload=HOST_WORKLOAD,
            inefficient={
                **resnet_tuned,
                "gc_collect_every_step": True,
                "gc_freeze": False,
                "item_every_step": True,
            },
            tuned={
                **resnet_tuned,
                "gc_collect_every_step": True,
                "gc_freeze": True,
                "item_every_step": False,
            },
            defects=(
                Defect(
                    name="a full gc.collect() in every step over an unfrozen heap",
                    planted={"gc_collect_every_step": True, "gc_freeze": False},
                    rules=("gc-pauses",),
                    note="a collection walks every tracked object (~300k after importing "
                    "torch: ~100 ms); the tuned side applies the rule's fix, gc.freeze(), and "
                    "keeps collecting",
                ),
                Defect(
                    name=".item() on the loss in every step",
                    planted={"item_every_step": True},
                    rules=("host-sync-in-step",),
                    note="a host sync only costs time on a GPU; a CPU trace still counts it",
                ),
            ),
            note="the tuned resnet with only host-side defects planted",
            knob_names=knobs_of(HOST_WORKLOAD),
        ),
    )


Fired = Mapping[tuple[str, Side], Collection[str]]
"""Rule ids that fired, by (workload, side)."""


@dataclass(frozen=True, order=True)
class Finding:
    """One rule on one side of one pair: where a score counts a hit, a miss or a false alarm."""

    workload: str
    side: Side
    rule: str


@dataclass(frozen=True, kw_only=True)
class Score:
    """Precision and recall of the rules over the planted defects.

    Strict: on each side of each pair, the rules expected are those of the defects present (and
    applicable on the device), and *every* applicable rule that fires anywhere else is a false
    positive, whether or not it names a planted defect.
    """

    hits: tuple[Finding, ...]
    misses: tuple[Finding, ...]
    """Expected and silent: a planted defect the rules did not see."""
    false_alarms: tuple[Finding, ...]
    """Fired where no present defect explains it."""

    @property
    def precision(self) -> float:
        """Hits over all firings (1.0 when nothing fired at all)."""
        fired = len(self.hits) + len(self.false_alarms)
        return len(self.hits) / fired if fired else 1.0

    @property
    def recall(self) -> float:
        """Hits over all expected firings (1.0 when nothing was expected)."""
        expected = len(self.hits) + len(self.misses)
        return len(self.hits) / expected if expected else 1.0


def score(
    pairs: Collection[VariantPair],
    fired: Fired,
    applicable: Collection[str],
    sides: Sequence[Side] = SIDES,
) -> Score:
    """Score what fired on ``sides`` of each pair; ``applicable``: rules that can apply on the
    device the evidence came from (the others are neither expected nor counted)."""
    hits: list[Finding] = []
    misses: list[Finding] = []
    false_alarms: list[Finding] = []
    for pair in pairs:
        for side in sides:
            expected = pair.expected_rules(side, applicable)
            seen = set(fired.get((pair.workload, side), ())) & set(applicable)
            unexplained = seen - expected - pair.tolerated_rules(side)
            hits += (Finding(pair.workload, side, rule) for rule in sorted(expected & seen))
            misses += (Finding(pair.workload, side, rule) for rule in sorted(expected - seen))
            false_alarms += (Finding(pair.workload, side, rule) for rule in sorted(unexplained))
    return Score(hits=tuple(hits), misses=tuple(misses), false_alarms=tuple(false_alarms))


def table_lines(
    pairs: Collection[VariantPair],
    fired: Fired,
    applicable: Collection[str],
    sides: Sequence[Side] = SIDES,
) -> list[str]:
    """The planted-defect table as text: one line per defect and rule, then the score.

    A side's cell reads ``fired``/``silent`` where the defect is present there and ``(fired)``/
    ``-`` where it is not; ``n/a`` marks a rule that cannot apply on this device.
    """
    lines = [
        f"{'workload':<12} {'defect':<58} {'knobs':<44} {'rule':<27} "
        + "  ".join(f"{side:<11}" for side in sides).rstrip(),
    ]
    for pair in pairs:
        for defect in pair.defects:
            knobs = ", ".join(f"{k}={v}" for k, v in sorted(defect.planted.items()))
            for rule in defect.rules:
                cells = []
                for side in sides:
                    if rule not in applicable:
                        cells.append("n/a")
                        continue
                    went_off = rule in fired.get((pair.workload, side), ())
                    if defect in pair.present(side):
                        cells.append("fired" if went_off else "silent")
                    else:
                        cells.append("(fired)" if went_off else "-")
                lines.append(
                    f"{pair.workload:<12} {defect.name:<58} {knobs:<44} {rule:<27} "
                    + "  ".join(f"{cell:<11}" for cell in cells).rstrip()
                )
    result = score(pairs, fired, applicable, sides)
    lines.append(
        f"precision {result.precision:.0%} ({len(result.hits)} of "
        f"{len(result.hits) + len(result.false_alarms)} firings), recall {result.recall:.0%} "
        f"({len(result.hits)} of {len(result.hits) + len(result.misses)} expected)"
    )
    lines.append(
        "fired/silent: the defect is present on that side; (fired)/-: it is not; "
        "n/a: the rule cannot apply on this device"
    )
    lines += [f"  missed: {f.rule} on {f.workload} ({f.side})" for f in result.misses]
    lines += [f"  false alarm: {f.rule} on {f.workload} ({f.side})" for f in result.false_alarms]
    lines += [
        f"  also drawn: {rule} on {pair.workload} ({side}), explained by {defect.name}"
        for pair in pairs
        for side in sides
        for defect in pair.present(side)
        for rule in defect.also
        if rule in applicable and rule in fired.get((pair.workload, side), ())
    ]
    return lines


def knob_assignments(pairs: Collection[VariantPair], side: Side) -> list[str]:
    """``--knob`` values (``WORKLOAD.KEY=VALUE``) selecting one side of every pair."""
    return [
        f"{pair.workload}.{name}={'null' if value is None else value}"
        for pair in pairs
        for name, value in sorted(pair.knobs(side).items())
    ]


def variant_config(root: Path) -> Config:
    """The embedded defaults at ``root`` with the ``resnet-host`` workload declared (this file
    is copied into ``root`` for it)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(__file__, root / f"{MODULE}.py")
    definition = BUILTIN_WORKLOADS[HOST_BASE]
    host = UserWorkloadConfig(
        name=HOST_WORKLOAD,
        factory=f"{MODULE}:host_defects",
        description=f"built-in {HOST_BASE} plus host-side defects no standard knob plants",
        presets={
            preset: {"base": HOST_BASE, **params} for preset, params in definition.presets.items()
        },
        knobs={
            **{name: spec.default for name, spec in definition.knobs.items()},
            **HOST_KNOBS,
        },
    )
    return Config(root=root, workloads={HOST_WORKLOAD: host})


def host_defects(ctx: WorkloadContext) -> TrainingSetup:
    """Factory: the built-in ``ctx.params["base"]`` with the host-side defects its knobs plant.

    ``gc_collect_every_step`` runs ``gc.collect()`` after every step (a common workaround for
    leaks). ``gc_freeze`` calls ``gc.freeze()`` once, after the first step, so that collections
    skip everything that exists by then: the model, and what ``torch.compile`` built on that
    step (frozen earlier, a compiled model's own objects would still be walked every time).
    ``item_every_step`` reads the loss with ``.item()`` in every step, as loss logging does,
    breaking on purpose the protocol's rule against it.
    """
    params: dict[str, Any] = dict(ctx.params)
    definition = BUILTIN_WORKLOADS[str(params.pop("base"))]
    own = {name: bool(ctx.knobs.get(name, default)) for name, default in HOST_KNOBS.items()}
    inner = replace(
        ctx,
        params=params,
        knobs={name: value for name, value in ctx.knobs.items() if name not in HOST_KNOBS},
    )
    setup: TrainingSetup = load_factory(definition.factory)(inner)
    step = setup.step
    steps_taken = 0

    def planted_step(batch: Any) -> Any:
        nonlocal steps_taken
        loss = step(batch)
        steps_taken += 1
        if own["item_every_step"]:
            loss.item()
        if own["gc_freeze"] and steps_taken == 1:
            gc.collect()
            gc.freeze()
        elif own["gc_collect_every_step"]:
            gc.collect()
        return loss

    setup.step = planted_step
    setup.knobs = {**setup.knobs, **own}
    return setup
