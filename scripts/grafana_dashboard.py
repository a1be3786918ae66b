"""Build perfgate's Grafana dashboard (perfgate/monitoring/files/grafana-dashboard.json).

    python scripts/grafana_dashboard.py            # rewrite the shipped JSON
    python scripts/grafana_dashboard.py --check    # exit 1 if it is not what this builds

Built with grafana-foundation-sdk (Grafana's typed builders) rather than written by hand, from
the series perfgate defines (``perfgate.monitoring.series`` and ``perfgate.monitoring.live``),
so a panel can only query a series that exists. The JSON is provisionable as it is: put it in
a folder Grafana's dashboard provider reads, with a Prometheus data source of any name (the
``datasource`` variable picks it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from perfgate.monitoring import live, series

OUT = Path(__file__).resolve().parent.parent / "perfgate" / "monitoring" / "files"
DASHBOARD = OUT / "grafana-dashboard.json"
SOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
RUN_FILTER = (
    'suite=~"$suite", workload=~"$workload", branch=~"$branch", environment=~"$environment"'
)


def _query(expr: str, legend: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id("A").datasource(SOURCE)


def _runs(
    title: str, metric: series.Series, legend: str = "{{workload}}@{{preset}} {{gpu}}"
) -> timeseries.Panel:
    """A time series of one run series over the stored runs (one point per pushed run)."""
    return (
        timeseries.Panel()
        .title(title)
        .description(metric.help)
        .unit(metric.unit)
        .datasource(SOURCE)
        .with_target(_query(f"{metric.name}{{{RUN_FILTER}}}", legend))
        .height(8)
        .span(12)
    )


def _live(title: str, name: str, unit: str) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .description(live.LIVE_SERIES.get(name, name))
        .unit(unit)
        .datasource(SOURCE)
        .with_target(_query(f'{name}{{instance=~"$instance"}}', "{{instance}}"))
        .height(8)
        .span(8)
    )


def _variable(name: str, label: str, metric: str) -> dashboard.QueryVariable:
    return (
        dashboard.QueryVariable(name)
        .label(label)
        .query(f"label_values({metric}, {name})")
        .datasource(SOURCE)
        .multi(True)
        .include_all(True)
        .refresh(2)
    )


def build() -> dict[str, object]:
    """The dashboard as JSON-ready data."""
    board = (
        dashboard.Dashboard("perfgate: training performance")
        .uid("perfgate-training")
        .tags(["perfgate", "training", "performance"])
        .refresh("30s")
        .time("now-30d", "now")
        .with_variable(
            dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
        )
        .with_variable(_variable("suite", "suite", series.STEP_TIME.name))
        .with_variable(_variable("workload", "workload", series.STEP_TIME.name))
        .with_variable(_variable("branch", "branch", series.STEP_TIME.name))
        .with_variable(_variable("environment", "environment", series.STEP_TIME.name))
        .with_variable(_variable("instance", "monitored job", "perfgate_live_job_running"))
        .with_row(dashboard.Row("Verdicts (stored runs, newest per workload)"))
        .with_panel(
            stat.Panel()
            .title("Regressions on main")
            .description(series.VERDICT.help)
            .datasource(SOURCE)
            .with_target(
                _query(
                    f'sum(perfgate_verdict{{state="regression", branch="main", {RUN_FILTER}}})',
                    "regressions",
                )
            )
            .height(4)
            .span(6)
        )
        .with_panel(
            stat.Panel()
            .title("Inconclusive on main")
            .description(series.VERDICT.help)
            .datasource(SOURCE)
            .with_target(
                _query(
                    f'sum(perfgate_verdict{{state="inconclusive", branch="main", {RUN_FILTER}}})',
                    "inconclusive",
                )
            )
            .height(4)
            .span(6)
        )
        .with_panel(
            timeseries.Panel()
            .title("Change against the baseline (worse is greater)")
            .description(series.CHANGE.help)
            .unit("none")
            .datasource(SOURCE)
            .with_target(
                _query(
                    f"{series.CHANGE.name}{{{RUN_FILTER}}}", "{{workload}} {{metric}} {{branch}}"
                )
            )
            .height(4)
            .span(12)
        )
        .with_row(dashboard.Row("Speed (stored runs)"))
        .with_panel(_runs("Step time", series.STEP_TIME))
        .with_panel(_runs("Throughput (samples/s)", series.SAMPLES))
        .with_panel(_runs("MFU", series.MFU))
        .with_panel(_runs("Fraction of the measured ceiling", series.CEILING))
        .with_row(dashboard.Row("GPU and memory (stored runs)"))
        .with_panel(_runs("GPU utilisation", series.GPU_UTIL))
        .with_panel(_runs("Throttled share", series.GPU_THROTTLED))
        .with_panel(_runs("SM clock", series.GPU_CLOCK))
        .with_panel(_runs("Power", series.GPU_POWER))
        .with_panel(_runs("Peak memory", series.PEAK_MEMORY))
        .with_panel(
            timeseries.Panel()
            .title("What bounds the step")
            .description(series.BOTTLENECK.help)
            .datasource(SOURCE)
            .with_target(
                _query(f"{series.BOTTLENECK.name}{{{RUN_FILTER}}} == 1", "{{workload}}: {{bound}}")
            )
            .height(8)
            .span(12)
        )
        .with_row(dashboard.Row("Live training jobs (perfgate monitor)"))
        .with_panel(_live("Step time", "perfgate_live_step_time_seconds", "s"))
        .with_panel(
            _live("Throughput (samples/s)", "perfgate_live_throughput_samples_per_second", "none")
        )
        .with_panel(_live("Time between steps", "perfgate_live_input_wait_ratio", "percentunit"))
        .with_panel(_live("GPU utilisation", "perfgate_live_gpu_utilization_ratio", "percentunit"))
        .with_panel(_live("GPU power", "perfgate_live_gpu_power_watts", "watt"))
        .with_panel(_live("CPU of the job", "perfgate_live_cpu_utilization_ratio", "percentunit"))
    )
    data: dict[str, object] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    return data


def text() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        same = DASHBOARD.read_text() == text()
        print("grafana dashboard:", "up to date" if same else "stale: rebuild it")
        return 0 if same else 1
    DASHBOARD.write_text(text())
    print(f"wrote {DASHBOARD}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
