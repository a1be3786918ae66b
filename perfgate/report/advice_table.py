"""The advisor's ranked advice of one workload as a terminal table (``perfgate advise``,
``perfgate run --profile``): each advice with its tier, estimated saving, the evidence behind it
and, when it was verified, the measured speedup with its interval."""

from __future__ import annotations

from rich.table import Table

from perfgate.documents.advice import WorkloadAdvice, in_measured_order, standing
from perfgate.report.terminal import PlainTable


def advice_table(result: WorkloadAdvice) -> Table:
    """Ranked advice of one workload with the evidence behind each and, if run, the proof."""
    bound = f" · {result.diagnosis.label}" if result.diagnosis is not None else ""
    table = PlainTable(
        title=f"perfgate advise · {result.name}@{result.preset}{bound} · "
        f"{len(result.advice)} advice",
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
    return f"{value:.3g}" if isinstance(value, float) else str(value)
