"""Rule files: one TOML file per rule, loaded into ``Rule`` objects or linted into problems.

A rule is data, not code, so anyone can add one; the price is strict validation. Every field is
checked when the file is read — unknown or missing fields, wrong types, expressions that do not
parse or type-check against the evidence catalogue, knobs that are not standard knobs — and each
problem carries the file, line and column it is at (``tomllib`` gives no positions, so
``_Locator`` finds keys by scanning the text, and expression errors are mapped through the
string's escapes to the offending character).

A rule file::

    id = "tf32-disabled"                 # kebab-case, equal to the file name, unique
    title = "fp32 matmuls without TF32"
    category = "precision"               # kebab-case
    confidence = "high"                  # high | medium | low
    requires = ["matmul_share", "fp32_matmul_fraction", "tf32_matmul"]
    when = "matmul_share >= 0.05 and fp32_matmul_fraction >= 0.5"
    affected = "matmul_share * fp32_matmul_fraction"   # share of step time the fix speeds up
    speedup = 3                          # speed-up factor of that share (>= 1)
    max_saving = 0.3                     # optional cap on the estimated saving
    already_on = "tf32_matmul"           # true when the fix is already applied: never fires
    fix = "..."
    snippet = "..."                      # optional code
    references = ["https://..."]         # optional URLs

    measured_speedup = "sdpa"            # optional: a fix microbenchmark (perfgate.ceilings.fixes)
                                         # whose figure, measured here, replaces speedup

    [[patterns]]                         # optional, any number, the first that holds wins
    when = 'present(attention_pattern) and attention_pattern == "multihead_attention_weights"'
    name = "nn.MultiheadAttention returning its attention weights"  # the code pattern seen
    fix = "..."                          # the fix for that pattern (replaces the rule's)
    snippet = "..."                      # optional (replaces the rule's)
    site = "attention_site"              # optional: the text evidence naming where it ran

    [applies]                            # optional; each key optional
    devices = ["cuda"]                   # cpu, cuda
    min_compute_capability = 8.0         # inclusive bounds
    max_compute_capability = 9.0
    workload_kinds = ["transformer"]     # the evidence's workload_kind

    [verify]
    knobs = { precision = "bf16" }       # standard knobs; {} = unverifiable
    # a knob may be computed: num_workers = { expr = "2 * dataloader_num_workers" }

Expressions (``perfgate.advise.expr``) may read evidence the rule lists in ``requires``, or
evidence they guard with ``present(name)``. Reading anything else is an *error*, not a warning:
the name would be silently missing on some machines and the rule would silently never fire —
the failure this library exists to avoid. For the same reason a rule limited to some devices may
not require evidence that is never measured on any of them.
"""

from __future__ import annotations

import bisect
import difflib
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perfgate._rules_path import rule_folders
from perfgate.advise.catalogue import EVIDENCE
from perfgate.advise.expr import (
    CheckError,
    EvidenceKindSpec,
    Expr,
    Kind,
    Name,
    ParseError,
    check,
    guarded_names,
    names,
    parse,
    walk,
)
from perfgate.ceilings.fixes import FIX_BENCHMARKS
from perfgate.config import load_config
from perfgate.errors import UsageError
from perfgate.workloads.knobs import STANDARD_KNOBS
from perfgate.workloads.protocol import KnobValue

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

Confidence = Literal["high", "medium", "low"]
CONFIDENCES: tuple[Confidence, ...] = ("high", "medium", "low")
DEVICES = ("cpu", "cuda")
_KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*\Z")
_REQUIRED = (
    "id",
    "title",
    "category",
    "confidence",
    "requires",
    "when",
    "speedup",
    "affected",
    "already_on",
    "fix",
    "verify",
)
_OPTIONAL = ("applies", "max_saving", "snippet", "references", "patterns", "measured_speedup")
_PATTERN_FIELDS = ("when", "name", "fix")
_PATTERN_OPTIONAL = ("snippet", "site")
_APPLIES = ("devices", "min_compute_capability", "max_compute_capability", "workload_kinds")
_FORMULAS: tuple[tuple[str, Kind], ...] = (
    ("when", "bool"),
    ("already_on", "bool"),
    ("speedup", "number"),
    ("affected", "number"),
    ("max_saving", "number"),
)
"""Fields holding an expression, with the kind each must give."""
_KNOB_KINDS: dict[type, Kind] = {bool: "bool", int: "number", str: "text"}


@dataclass(frozen=True)
class Formula:
    """An expression from a rule file: its text and its checked tree."""

    source: str
    tree: Expr

    @property
    def names(self) -> frozenset[str]:
        """Evidence names the expression reads."""
        return names(self.tree)


@dataclass(frozen=True)
class Applies:
    """Where a rule applies; an empty or absent bound does not restrict."""

    devices: tuple[str, ...] = ()
    min_compute_capability: float | None = None
    max_compute_capability: float | None = None
    workload_kinds: tuple[str, ...] = ()


KnobSetting = KnobValue | Formula
"""A verify knob's value: a literal, or a formula computed from the evidence."""


@dataclass(frozen=True, kw_only=True)
class Pattern:
    """A code pattern a rule can tell apart, and the fix for it (``[[patterns]]``)."""

    when: Formula
    name: str
    """The pattern as the advice names it: ``nn.MultiheadAttention returning its weights``."""
    fix: str
    snippet: str | None
    site: str | None
    """The text evidence that says where the pattern ran (``attention_site``), if any."""


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One validated rule file."""

    id: str
    title: str
    category: str
    confidence: Confidence
    applies: Applies
    requires: tuple[str, ...]
    """Evidence that must be present for the rule to be evaluated at all."""
    when: Formula
    speedup: Formula
    affected: Formula
    max_saving: Formula | None
    already_on: Formula
    fix: str
    snippet: str
    references: tuple[str, ...]
    verify_knobs: Mapping[str, KnobSetting]
    """Knob changes whose A/B run would verify the advice; empty: unverifiable."""
    path: Path
    patterns: tuple[Pattern, ...] = ()
    """The code patterns the rule tells apart, in order: the first whose ``when`` holds names
    the advice's pattern and gives its fix."""
    measured_speedup: str | None = None
    """The fix microbenchmark (``perfgate.ceilings.fixes.FIX_BENCHMARKS``) whose speed-up,
    measured on this machine at the workload's shapes, replaces ``speedup`` when it ran."""

    @property
    def formulas(self) -> tuple[Formula, ...]:
        """Every expression that decides the rule and its estimate, knob formulas included
        (a pattern's condition only picks the fix)."""
        knob_formulas = (v for v in self.verify_knobs.values() if isinstance(v, Formula))
        optional = (self.max_saving,) if self.max_saving is not None else ()
        return (self.when, self.speedup, self.affected, self.already_on, *optional, *knob_formulas)

    @property
    def evidence_names(self) -> frozenset[str]:
        """Every evidence name the rule reads: what an advice shows as its backing."""
        return frozenset(self.requires).union(*(f.names for f in self.formulas))


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong in a rule file; line and column are 1-based, 0 when unknown."""

    path: Path
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        if self.line == 0:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}:{self.column}: {self.message}"


def lint(
    folders: Sequence[Path], catalogue: Mapping[str, EvidenceKindSpec] | None = None
) -> list[Problem]:
    """Every problem in the rule files of ``folders`` (``*.toml``, not recursive), sorted."""
    return _read_folders(folders, EVIDENCE if catalogue is None else catalogue)[1]


def load_rules(
    folders: Sequence[Path], catalogue: Mapping[str, EvidenceKindSpec] | None = None
) -> list[Rule]:
    """The rules of ``folders`` sorted by id; a ``UsageError`` listing problems if any."""
    rules, problems = _read_folders(folders, EVIDENCE if catalogue is None else catalogue)
    if problems:
        shown = "; ".join(str(problem) for problem in problems[:3])
        more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise UsageError(
            f"{len(problems)} problem{'s' if len(problems) > 1 else ''} in rule files: "
            f"{shown}{more}",
            "run perfgate rules lint for the full list",
        )
    return rules


def configured_rule_folders(config_path: Path | None) -> list[Path]:
    """The built-in rules folder and the ``rule_paths`` of the configuration at
    ``config_path`` (None: the nearest one upwards)."""
    return rule_folders(load_config(config_path))


def configured_rules(config_path: Path | None, device: str | None = None) -> list[Rule]:
    """``perfgate rules list``: the rules of :func:`configured_rule_folders`; with ``device``
    (cpu or cuda), only those that can apply on it."""
    if device is not None and device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device!r} is not allowed", "use cpu or cuda")
    rules = load_rules(configured_rule_folders(config_path))
    return [
        r for r in rules if device is None or not r.applies.devices or device in r.applies.devices
    ]


def _read_folders(
    folders: Sequence[Path], catalogue: Mapping[str, EvidenceKindSpec]
) -> tuple[list[Rule], list[Problem]]:
    rules: dict[str, Rule] = {}
    problems: list[Problem] = []
    for folder in folders:
        if not folder.is_dir():
            problems.append(Problem(folder, 0, 0, "no such folder of rule files"))
            continue
        for path in sorted(folder.glob("*.toml")):
            reader = _RuleReader(path, catalogue)
            rule = reader.read()
            problems.extend(reader.problems)
            if rule is None:
                continue
            if rule.id in rules:
                line, column = reader.locator.position(("id",))
                first = rules[rule.id].path
                problems.append(
                    Problem(path, line, column, f"id {rule.id!r} is already used by {first}")
                )
                continue
            rules[rule.id] = rule
    return sorted(rules.values(), key=lambda r: r.id), sorted(problems)


class _RuleReader:
    """Reads one rule file, collecting problems instead of stopping at the first."""

    def __init__(self, path: Path, catalogue: Mapping[str, EvidenceKindSpec]) -> None:
        self.path = path
        self.catalogue = catalogue
        self.problems: list[Problem] = []
        self.text = ""
        self.locator = _Locator("")

    def problem(self, message: str, key: tuple[str, ...] = (), needle: str | None = None) -> None:
        """Record ``message`` at ``key`` (at ``needle`` after it when given), else line 1."""
        if not key:
            self.problems.append(Problem(self.path, 1, 1, message))
            return
        line, column = self.locator.position(key, needle)
        self.problems.append(Problem(self.path, line, column, message))

    def read(self) -> Rule | None:
        try:
            self.text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.problems.append(Problem(self.path, 0, 0, f"cannot read the file ({exc})"))
            return None
        self.locator = _Locator(self.text)
        try:
            document = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            self.problems.append(_toml_problem(self.path, str(exc), self.text))
            return None
        except RecursionError:  # tomllib recurses into nested arrays and tables
            self.problems.append(Problem(self.path, 1, 1, "nested too deeply to be a rule"))
            return None
        return self._rule(document)

    def _rule(self, document: dict[str, Any]) -> Rule | None:
        """Check every field that is there (a missing one is reported once, by ``_fields``);
        a ``Rule`` only when nothing at all is wrong."""
        before = len(self.problems)
        self._fields(document, (), _REQUIRED, _OPTIONAL)
        rule_id = self._text(document, "id")
        if rule_id and not _KEBAB.match(rule_id):
            self.problem(f"id {rule_id!r} is not kebab-case (a-z, 0-9, -)", ("id",))
        elif rule_id and rule_id != self.path.stem:
            self.problem(f"id {rule_id!r} differs from the file name {self.path.name}", ("id",))
        category = self._text(document, "category")
        if category and not _KEBAB.match(category):
            self.problem(f"category {category!r} is not kebab-case", ("category",))
        confidence = self._confidence(document)
        applies = self._applies(document.get("applies", {}))
        requires = self._requires(document.get("requires", []), applies)
        formulas: dict[str, Formula] = {}
        for key, kind in _FORMULAS:
            formula = (
                self._formula(document[key], (key,), kind, requires) if key in document else None
            )
            if formula is not None:
                formulas[key] = formula
        knobs = self._knobs(document["verify"], requires) if "verify" in document else {}
        title, fix = self._text(document, "title"), self._text(document, "fix")
        snippet = self._text(document, "snippet", empty_ok=True)
        references = self._references(document.get("references", []))
        patterns = self._patterns(document.get("patterns", []), requires)
        measured = document.get("measured_speedup")
        if measured is not None and measured not in FIX_BENCHMARKS:
            self.problem(
                f"measured_speedup {measured!r} is not one of {', '.join(FIX_BENCHMARKS)}",
                ("measured_speedup",),
            )
        if len(self.problems) > before:
            return None
        return Rule(
            id=rule_id,
            title=title,
            category=category,
            confidence=confidence,
            applies=applies,
            requires=requires,
            when=formulas["when"],
            speedup=formulas["speedup"],
            affected=formulas["affected"],
            max_saving=formulas.get("max_saving"),
            already_on=formulas["already_on"],
            fix=fix,
            snippet=snippet,
            references=references,
            verify_knobs=knobs,
            path=self.path,
            patterns=patterns,
            measured_speedup=measured,
        )

    def _confidence(self, document: Mapping[str, Any]) -> Confidence:
        text = self._text(document, "confidence")
        if "confidence" not in document:
            return "low"
        for confidence in CONFIDENCES:
            if text == confidence:
                return confidence
        self.problem(f"confidence {text!r} is not high, medium or low", ("confidence",))
        return "low"

    def _fields(
        self,
        table: Mapping[str, Any],
        where: tuple[str, ...],
        required: Sequence[str],
        optional: Sequence[str],
    ) -> None:
        known = (*required, *optional)
        label = f"[{'.'.join(where)}] " if where else ""
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                self.problem(f"unknown field {label}{key!r}{hint}", (*where, key))
        for key in required:
            if key not in table:
                self.problem(f"missing field {label}{key!r}", where)

    def _text(self, table: Mapping[str, Any], key: str, *, empty_ok: bool = False) -> str:
        """The text at ``key``; "" when it is absent (``_fields`` reports a required one)."""
        value = table.get(key, "")
        if not isinstance(value, str):
            self.problem(f"{key} should be text, got {_toml_type(value)}", (key,))
            return ""
        if key in table and not value.strip() and not empty_ok:
            self.problem(f"{key} is empty", (key,))
        return value

    def _strings(self, value: Any, key: tuple[str, ...]) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.problem(f"{'.'.join(key)} should be a list of text", key)
            return ()
        return tuple(value)

    def _applies(self, table: Any) -> Applies:
        if not isinstance(table, dict):
            self.problem(f"applies should be a table, got {_toml_type(table)}", ("applies",))
            return Applies()
        self._fields(table, ("applies",), (), _APPLIES)
        devices = self._strings(table.get("devices", []), ("applies", "devices"))
        for device in devices:
            if device not in DEVICES:
                self.problem(f"device {device!r} is not cpu or cuda", ("applies", "devices"))
        bounds = [
            self._capability(table.get(key), key)
            for key in ("min_compute_capability", "max_compute_capability")
        ]
        if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
            self.problem(
                "min_compute_capability exceeds max", ("applies", "max_compute_capability")
            )
        if (bounds[0] is not None or bounds[1] is not None) and devices != ("cuda",):
            self.problem(
                'compute capability bounds need devices = ["cuda"] (other devices have none)',
                ("applies",),
            )
        return Applies(
            devices=devices,
            min_compute_capability=bounds[0],
            max_compute_capability=bounds[1],
            workload_kinds=self._strings(
                table.get("workload_kinds", []), ("applies", "workload_kinds")
            ),
        )

    def _capability(self, value: Any, key: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 100:
            self.problem(f"{key} should be a number such as 8.0", ("applies", key))
            return None
        return float(value)

    def _requires(self, value: Any, applies: Applies) -> tuple[str, ...]:
        requires = self._strings(value, ("requires",))
        devices = [device for device in applies.devices if device in DEVICES]
        for position, name in enumerate(requires):
            spec = self.catalogue.get(name)
            if spec is None:
                close = difflib.get_close_matches(name, list(self.catalogue), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                self.problem(f"unknown evidence {name!r}{hint}", ("requires",), f'"{name}"')
            elif name in requires[:position]:
                self.problem(f"{name!r} is required twice", ("requires",), f'"{name}"')
            elif devices and not set(devices) & set(_devices_of(spec)):
                self.problem(
                    f"{name!r} is never measured on {', '.join(devices)}: "
                    "the rule could never fire",
                    ("requires",),
                    f'"{name}"',
                )
        return requires

    def _formula(
        self, value: Any, key: tuple[str, ...], kind: Kind, requires: tuple[str, ...]
    ) -> Formula | None:
        """A checked formula; ``None`` (and a problem) when it is wrong."""
        if isinstance(value, bool) and kind == "bool":
            return Formula("true" if value else "false", parse("true" if value else "false"))
        if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
            source = repr(float(value))
            if not 0 <= value < float("inf"):
                self.problem(f"{'.'.join(key)} = {value} should be a finite number >= 0", key)
                return None
            return Formula(source, parse(source))
        if not isinstance(value, str):
            wanted = "true/false" if kind == "bool" else "a number"
            self.problem(
                f"{'.'.join(key)} should be an expression (text) or {wanted}, "
                f"got {_toml_type(value)}",
                key,
            )
            return None
        label = ".".join(key)
        try:
            tree = parse(value)
            result = check(tree, self.catalogue)
        except (ParseError, CheckError) as exc:
            self._at_column(key, value, exc.column, f"{label}: {exc.message}")
            return None
        if result != kind:
            self._at_column(key, value, 1, f"{label} should give a {kind}, it gives a {result}")
            return None
        allowed = set(requires) | guarded_names(tree)
        reported: set[str] = set()
        for node in walk(tree):
            if isinstance(node, Name) and node.name not in allowed | reported:
                reported.add(node.name)
                self._at_column(
                    key,
                    value,
                    node.column,
                    f"{label} reads {node.name!r}, which is not in requires: "
                    f"add it there, or guard it with present({node.name})",
                )
        return Formula(value, tree) if not reported else None

    def _at_column(self, key: tuple[str, ...], value: str, column: int, message: str) -> None:
        line, col = self.locator.expression_position(key, value, column)
        self.problems.append(Problem(self.path, line, col, message))

    def _knobs(self, verify: Any, requires: tuple[str, ...]) -> dict[str, KnobSetting]:
        if not isinstance(verify, dict):
            self.problem(f"verify should be a table, got {_toml_type(verify)}", ("verify",))
            return {}
        self._fields(verify, ("verify",), ("knobs",), ())
        table = verify.get("knobs", {})
        if not isinstance(table, dict):
            self.problem(
                "verify.knobs should be a table ({} when unverifiable)", ("verify", "knobs")
            )
            return {}
        knobs: dict[str, KnobSetting] = {}
        for name, raw in table.items():
            key = ("verify", "knobs", name)
            spec = STANDARD_KNOBS.get(name)
            if spec is None:
                standard = ", ".join(sorted(STANDARD_KNOBS))
                self.problem(f"{name!r} is not a standard knob ({standard})", key)
            elif isinstance(raw, dict):
                if set(raw) != {"expr"}:
                    self.problem(f'knob {name} = {{ expr = "..." }} takes only expr', key)
                    continue
                formula = self._formula(
                    raw["expr"], (*key, "expr"), _KNOB_KINDS[spec.kind], requires
                )
                if formula is not None:
                    knobs[name] = formula
            else:
                try:
                    knobs[name] = spec.coerce(raw)
                except UsageError as exc:
                    self.problem(exc.one_line(), key)
        return knobs

    def _patterns(self, value: Any, requires: tuple[str, ...]) -> tuple[Pattern, ...]:
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            self.problem("patterns should be [[patterns]] tables", ("patterns",))
            return ()
        patterns = []
        for position, table in enumerate(value):
            where = ("patterns", str(position))
            self._fields(table, where, _PATTERN_FIELDS, _PATTERN_OPTIONAL)
            when = (
                self._formula(table["when"], (*where, "when"), "bool", requires)
                if "when" in table
                else None
            )
            site = table.get("site")
            if site is not None and (
                not isinstance(site, str) or getattr(self.catalogue.get(site), "kind", "") != "text"
            ):
                self.problem(f"site {site!r} is not a text evidence name", (*where, "site"))
                site = None
            name, fix = self._text(table, "name"), self._text(table, "fix")
            snippet = table.get("snippet")
            if snippet is not None and not isinstance(snippet, str):
                self.problem(f"snippet should be text, got {_toml_type(snippet)}", (*where,))
                snippet = None
            if when is not None and name and fix:
                patterns.append(Pattern(when=when, name=name, fix=fix, snippet=snippet, site=site))
        return tuple(patterns)

    def _references(self, value: Any) -> tuple[str, ...]:
        references = self._strings(value, ("references",))
        for url in references:
            if not url.startswith(("https://", "http://")):
                self.problem(f"reference {url!r} is not a URL", ("references",), f'"{url}"')
        return references


def _devices_of(spec: EvidenceKindSpec) -> tuple[str, ...]:
    """Devices a catalogue entry is measured on; every device when the catalogue does not say."""
    devices = getattr(spec, "devices", None)
    return tuple(devices) if devices is not None else DEVICES


def _toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return f"true/false {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"text {value!r}"
    return "a table" if isinstance(value, dict) else f"{type(value).__name__}"


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_TOML_END = re.compile(r"\s*\(at end of document\)\s*$")


def _toml_problem(path: Path, message: str, text: str) -> Problem:
    """A TOML syntax error at the line and column tomllib names in its message."""
    found = _TOML_POSITION.search(message)
    if found:
        line, column = int(found.group(1)), int(found.group(2))
        message = message[: found.start()]
    else:
        line, column = max(1, text.count("\n") + 1), 1
        message = _TOML_END.sub("", message)
    return Problem(path, line, column, f"not valid TOML: {message}")


class _Locator:
    """Line and column of keys and of characters inside string values of a TOML text.

    A line scanner, not a TOML parser: it reads bare and dotted keys, ``[table]`` headers and
    skips the inside of multi-line strings. Anything it cannot place lands on the line of the
    nearest enclosing key it found, else on line 1 — a position is a help, never a reason to
    fail.
    """

    _HEADER = re.compile(r"\s*\[\s*([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*\]")
    _ARRAY = re.compile(r"\s*\[\[\s*([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*\]\]")
    _ASSIGN = re.compile(r"\s*([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*=")

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
        self.keys: dict[tuple[str, ...], int] = {}
        """Dotted key path → offset of the key in the text."""
        self._scan()

    def _scan(self) -> None:
        table: tuple[str, ...] = ()
        counts: dict[tuple[str, ...], int] = {}
        """``[[name]]`` tables seen so far: the n-th one's keys are under ``(name, "n")``."""
        closing: str | None = None
        for start, line in zip(self.line_starts, self.text.split("\n"), strict=True):
            if closing is not None:
                closing = None if closing in line else closing
                continue
            array = self._ARRAY.match(line)
            if array:
                name = _dotted(array.group(1))
                counts[name] = counts.get(name, -1) + 1
                table = (*name, str(counts[name]))
                self.keys.setdefault(table, start + array.start(1))
                continue
            header = self._HEADER.match(line)
            if header:
                table = _dotted(header.group(1))
                self.keys.setdefault(table, start + header.start(1))
                continue
            assign = self._ASSIGN.match(line)
            if assign:
                self.keys.setdefault((*table, *_dotted(assign.group(1))), start + assign.start(1))
                rest = line[assign.end() :].lstrip()
                for quotes in ('"""', "'''"):
                    if rest.startswith(quotes) and quotes not in rest[3:]:
                        closing = quotes

    def position(self, key: tuple[str, ...], needle: str | None = None) -> tuple[int, int]:
        """Where ``key`` is written (at ``needle`` after it, when given and found)."""
        offset = self._offset(key)
        if offset is None:
            return (1, 1)
        if needle is not None:
            found = self.text.find(needle, offset)
            offset = found if found >= 0 else offset
        return self._line_column(offset)

    def _offset(self, key: tuple[str, ...]) -> int | None:
        for length in range(len(key), 0, -1):
            offset = self.keys.get(key[:length])
            if offset is None:
                continue
            # Members of inline tables (knobs = { n = { expr = "..." } }): search after the parent.
            for part in key[length:]:
                inner = re.compile(rf"\b{re.escape(part)}\s*=").search(self.text, offset)
                if inner is None:
                    break
                offset = inner.start()
            return offset
        return None

    def expression_position(self, key: tuple[str, ...], value: str, column: int) -> tuple[int, int]:
        """Where character ``column`` (1-based) of the string ``value`` at ``key`` is written."""
        offset = self._offset(key)
        if offset is None:
            return (1, 1)
        offsets = self._string_offsets(offset, value)
        if offsets is None:
            return self._line_column(offset)
        return self._line_column(offsets[min(column, len(offsets)) - 1])

    def _string_offsets(self, key_offset: int, value: str) -> list[int] | None:
        """Text offset of each character of the string value after the key, plus the offset of
        its closing quote; ``None`` when the written string does not decode to ``value``."""
        equals = self.text.find("=", key_offset)
        at = equals + 1
        while at < len(self.text) and self.text[at] in " \t":
            at += 1
        quotes = next((q for q in ('"""', "'''", '"', "'") if self.text.startswith(q, at)), None)
        if equals < 0 or quotes is None:
            return None
        at += len(quotes)
        if len(quotes) == 3 and self.text.startswith("\n", at):
            at += 1
        offsets: list[int] = []
        while at < len(self.text) and not self.text.startswith(quotes, at):
            if quotes[0] == '"' and self.text[at] == "\\":
                at = self._escape(at, offsets)
            else:
                offsets.append(at)
                at += 1
        if len(offsets) != len(value):
            return None
        return [*offsets, at]

    def _escape(self, at: int, offsets: list[int]) -> int:
        """Record the character a basic-string escape at ``at`` stands for; the offset after it."""
        letter = self.text[at + 1 : at + 2]
        if letter in (" ", "\t", "\n", "\r"):  # line-ending backslash: stands for nothing
            at += 1
            while at < len(self.text) and self.text[at] in " \t\r\n":
                at += 1
            return at
        offsets.append(at)
        return at + {"u": 6, "U": 10}.get(letter, 2)

    def _line_column(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self.line_starts, offset) - 1
        return index + 1, offset - self.line_starts[index] + 1


def _dotted(key: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in key.split("."))


def rule_files(folders: Iterable[Path]) -> list[Path]:
    """The rule files ``lint`` and ``load_rules`` read in ``folders``, in that order."""
    return [path for folder in folders if folder.is_dir() for path in sorted(folder.glob("*.toml"))]
