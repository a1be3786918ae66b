"""The advisor's ranked advice of one workload as a terminal table (``perfgate advise``,
``perfgate run --profile``): each advice with its tier, estimated saving, the evidence behind it
and, when it was verified, the measured speedup with its interval."""

from __future__ import annotations

from rich.table import Table

from perfgate.documents.advice import WorkloadAdvice, found_text, in_measured_order, standing
from perfgate.report.terminal import PlainTable


def advice_table(result: WorkloadAdvice) -> Table:
    """Ranked advice of one workload with the evidence behind each and, if run, the proof."""
    bound = f" · {result.diagnosis.label}" if result.diagnosis is not None else ""
    what = (
        f"{result.name} (trace)" if result.source is not None else f"{result.name}@{result.preset}"
    )
    table = PlainTable(
        title=f"perfgate advise · {what}{bound} · {len(result.advice)} advice",
        title_justify="left",
        caption=result.diagnosis.reason if result.diagnosis is not None else None,
        caption_justify="left",
    )
    for header in ("#", "tier", "saving", "advice", "evidence", "status", "measured"):
        table.add_column(header)
    measured = {v.rule_id: v for v in result.verifications}
    for rank, item in enumerate(in_measured_order(result.advice, measured), start=1):
        proof = measured.get(item.rule_id)
        shown = "—"
        if proof is not None and proof.speedup is not None and proof.speedup_ci is not None:
            low, high = proof.speedup_ci
            shown = f"{proof.speedup:.2f}× ({low:.2f}–{high:.2f})"
        elif proof is not None:
            shown = proof.reason
        table.add_row(
            str(rank),
            item.tier,
            f"{item.saving:.1%}",
            f"{item.title} [{item.rule_id}]",
            ", ".join(f"{k}={_value(v)}" for k, v in item.evidence.items()),
            standing(item, proof),
            shown,
        )
    return table


def _value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def advice_notes(result: WorkloadAdvice) -> list[str]:
    """What the table has no room for, as lines: where each advice's pattern ran, its notes
    (an assumed fact, a knob that could not be computed), what its estimate rests on, and
    the configuration a trace implied."""
    lines = []
    measured = {v.rule_id: v for v in result.verifications}
    for rank, item in enumerate(in_measured_order(result.advice, measured), start=1):
        about = f"#{rank} {item.rule_id}"
        found = found_text(item)
        if found is not None:
            lines.append(f"{about}: found {found}")
        if item.estimate_basis is not None:
            lines.append(f"{about}: estimate from {item.estimate_basis}")
        lines.extend(f"{about}: {note}" for note in item.notes)
    for fact in result.inferred:
        kind = "assumed" if fact.assumed else "from the trace"
        lines.append(f"{kind}: {fact.name} = {_value(fact.value)} ({fact.reason})")
    return lines
