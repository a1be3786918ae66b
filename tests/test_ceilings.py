"""Measured ceilings: ``perfgate doctor --peak``, its store, and the fraction runs report.

Real execution throughout: the CLI as a subprocess, the microbenchmarks in this process. The
GPU benchmarks run only where torch sees a CUDA GPU (skipped here, with the reason); the GPU
side of the store and of the summary is exercised with a GPU-shaped ``Ceilings`` built from
figures, which is all those code paths read.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from fixture_types import CliRun

from perfgate.ceilings.bench import (
    Ceilings,
    Measurement,
    cpu_matmul,
    cpu_matmul_size,
    matmul_flops,
    pinned_threads,
)
from perfgate.ceilings.store import (
    ceilings_path,
    environment_key,
    lookup_ceilings,
    read_ceilings_file,
    save_ceilings,
    stored_ceilings,
)
from perfgate.documents.result import (
    FlopCount,
    RepeatResult,
    WorkloadSummary,
    load_result,
    validate_document,
)
from perfgate.errors import ExitCode, UsageError
from perfgate.report.ceilings import ceilings_document, ceilings_table
from perfgate.report.run_summary import CEILING_HINT
from perfgate.runner.summary import summarize_workload
from perfgate.telemetry.fingerprint import collect_fingerprint, fingerprint_key, with_world
from perfgate.telemetry.host import default_thread_count

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A project folder in which ``perfgate doctor --peak --device cpu`` has run once (as
    conftest's ``perfgate_cli`` runs it, which is function-scoped)."""
    project = tmp_path_factory.mktemp("project")
    environment = {**os.environ, "COLUMNS": "200"}
    environment.pop("PERFGATE_DATABASE_URL", None)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfgate",
            *("doctor", "--peak", "--device", "cpu"),
            "--json",
            "c.json",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    return {"project": project, "completed": completed}


def test_doctor_peak_on_cpu_stores_ceilings_by_fingerprint(measured: dict[str, Any]) -> None:
    completed = measured["completed"]
    assert completed.returncode == 0, completed.stdout + completed.stderr
    project: Path = measured["project"]
    stored = json.loads(ceilings_path(project).read_text())
    key = fingerprint_key(collect_fingerprint("cpu", default_thread_count()))
    assert stored["schema"] == "perfgate.ceilings-store" and list(stored["entries"]) == [key]
    entry = stored["entries"][key]
    assert entry["device"] == "cpu" and entry["fingerprint"]["threads"] == default_thread_count()
    assert entry["perfgate_version"] and entry["measured_at"]
    fp32 = entry["values"]["matmul_tflops"]["fp32"]
    assert fp32["min"] <= fp32["median"] <= fp32["max"] and len(fp32["samples"]) >= 5
    assert fp32["size"] == cpu_matmul_size(default_thread_count())
    copy = entry["values"]["bandwidth_bytes_per_s"]["memory_copy"]
    assert copy["median"] > 1e8  # > 0.1 GB/s: any DRAM does more; a wrong unit would not
    document = json.loads((project / "c.json").read_text())
    assert document["schema"] == "perfgate.ceilings" and document["fingerprint_key"] == key
    assert document["values"] == entry["values"]
    assert "matmul fp32" in completed.stdout and "GFLOP/s" in completed.stdout
    assert f"stored in {ceilings_path(project)}" in completed.stdout.replace("\n", "")


def test_matmul_figure_lies_within_the_spread_of_a_plain_loop() -> None:
    """perfgate's CPU matmul figure against a plain ``torch.matmul`` loop, side by side.

    The definition of "within the spread", chosen for a shared 2-core box where one process can
    run 5–20 % (at times 2×) slower than the next: five interleaved rounds in this one process,
    each running perfgate's measurement function and a plain loop (``a @ b`` at the same n and
    thread count, timed with ``time.perf_counter``, three samples), alternating which goes
    first, so whatever the machine does meanwhile lands on both. perfgate's figure is the median
    of its round medians; the plain loop's spread is [min, max] of all its samples. The figure
    must lie inside that spread — what the issue asks — and, to catch a systematic error the
    noise could hide (2n³ counted as n³ would double it), the ratio of the two medians must lie
    within the plain loop's own round-to-round spread, floored at ×1.5.
    """
    threads = default_thread_count()
    n = cpu_matmul_size(threads)
    generator = torch.Generator().manual_seed(1)
    a = torch.randn(n, n, generator=generator)
    b = torch.randn(n, n, generator=generator)

    def plain_loop() -> list[float]:
        with pinned_threads(threads):
            a @ b
            start = time.perf_counter()
            a @ b
            calls = max(1, round(0.1 / (time.perf_counter() - start)))
            rates = []
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(calls):
                    a @ b
                rates.append(matmul_flops(n) * calls / (time.perf_counter() - start) / 1e12)
        return rates

    ours: list[float] = []
    plain: list[list[float]] = []
    for round_index in range(5):
        if round_index % 2:
            plain.append(plain_loop())
        ours.append(cpu_matmul(n, threads=threads, samples=3, target_s=0.1, seed=1).median)
        if not round_index % 2:
            plain.append(plain_loop())
    figure = statistics.median(ours)
    samples = [rate for rates in plain for rate in rates]
    assert min(samples) <= figure <= max(samples), (figure, plain)
    plain_medians = [statistics.median(rates) for rates in plain]
    ratio = figure / statistics.median(plain_medians)
    allowed = max(1.5, max(plain_medians) / min(plain_medians))
    assert 1 / allowed <= ratio <= allowed, (ratio, ours, plain)


def test_run_reports_the_fraction_of_the_measured_ceiling(
    measured: dict[str, Any], perfgate_cli: CliRun
) -> None:
    project: Path = measured["project"]
    assert measured["completed"].returncode == 0
    completed = perfgate_cli(
        *(
            "run",
            "-w",
            "mlp",
            "--preset",
            "smoke",
            "--repeats",
            "2",
            "--steps",
            "5",
            "--warmup",
            "1",
        ),
        *("--device", "cpu", "--no-store", "--out", "r.json"),
        cwd=project,
    )
    assert completed.returncode == ExitCode.OK, completed.stdout + completed.stderr
    summary = load_result(project / "r.json").workloads[0].summary
    assert summary is not None and summary.tflops
    stored = lookup_ceilings(project, load_result(project / "r.json").environment)
    assert stored is not None and summary.ceiling_tflops == stored.matmul_tflops["fp32"]
    assert summary.ceiling_fraction is not None
    assert 0 < summary.ceiling_fraction < 1.5  # a tiny MLP reaches a few % of a big GEMM
    assert summary.ceiling_fraction == pytest.approx(summary.tflops / summary.ceiling_tflops)
    assert summary.ceiling_measured_at == stored.measured_at
    assert "of ceiling" in completed.stdout
    assert f"{summary.ceiling_fraction:.1%}" in completed.stdout
    assert "measured matmul ceiling" in completed.stdout and CEILING_HINT not in completed.stdout

    from perfgate.report.page import _workload_facts

    facts = dict(_workload_facts(load_result(project / "r.json").workloads[0]))
    assert facts["measured ceiling"].startswith(f"{summary.ceiling_fraction:.1%} of the measured")
    assert f"doctor --peak on {stored.measured_at[:10]}" in facts["measured ceiling"]


def test_run_without_ceilings_prints_the_hint(tmp_path: Path, perfgate_cli: CliRun) -> None:
    completed = perfgate_cli(
        *("run", "-w", "mlp", "--repeats", "1", "--steps", "3", "--warmup", "1"),
        *("--device", "cpu", "--no-store", "--out", "r.json"),
        cwd=tmp_path,
    )
    assert completed.returncode == ExitCode.OK, completed.stdout + completed.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    summary = data["workloads"][0]["summary"]
    assert not {"ceiling_tflops", "ceiling_fraction", "ceiling_measured_at"} & set(summary)
    assert CEILING_HINT in completed.stdout
    assert not ceilings_path(tmp_path).exists()


@pytest.mark.parametrize(
    "command",
    [
        ("doctor", "--peak", "--device", "cpu"),
        ("run", "-w", "mlp", "--device", "cpu", "--no-store"),
    ],
)
def test_a_corrupt_ceilings_file_is_a_one_line_usage_error(
    tmp_path: Path, perfgate_cli: CliRun, command: tuple[str, ...]
) -> None:
    path = ceilings_path(tmp_path)
    path.parent.mkdir()
    path.write_text('{"abc": {"measured_at": ')
    completed = perfgate_cli(*command, cwd=tmp_path, env={"COLUMNS": "1000"})  # no wrapping
    assert completed.returncode == ExitCode.USAGE, completed.stdout + completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert str(path) in lines[0] and "delete it and rerun `perfgate doctor --peak`" in lines[0]
    assert not list(tmp_path.glob(".perfgate/results/*.json"))  # nothing was measured
    assert path.read_text() == '{"abc": {"measured_at": '  # left for the user to look at


# --- the store and the summary, with figures (no benchmark needed) -------------------------


def _measurement(median: float, size: int) -> Measurement:
    return Measurement.of([median * 0.95, median, median * 1.02], size)


def _gpu_ceilings(key: str, **tflops: float) -> Ceilings:
    """What ``doctor --peak`` would store on an H100-class GPU (figures, not a measurement:
    there is no GPU here)."""
    return Ceilings(
        device="cuda",
        device_name="NVIDIA H100 80GB HBM3",
        threads=8,
        fingerprint_key=key,
        measured_at="2026-12-02T10:00:00+00:00",
        fingerprint={"device": "cuda", "gpu_model": "NVIDIA H100 80GB HBM3", "threads": 8},
        matmul={dtype: _measurement(value, 8192) for dtype, value in tflops.items()},
        bandwidth={"device_copy": _measurement(2.9e12, 2**30)},
        unsupported={"fp16": "an example reason"},
    )


def _repeat(step_s: float) -> RepeatResult:
    return RepeatResult(index=0, status="ok", step_times_s=[step_s] * 5)


def test_the_store_keeps_other_environments_and_picks_the_dtype(tmp_path: Path) -> None:
    cpu = collect_fingerprint("cpu", 1)
    save_ceilings(tmp_path, _gpu_ceilings("other", fp32=50.0))
    save_ceilings(tmp_path, _gpu_ceilings(environment_key(cpu), fp32=55.0, tf32=400.0, bf16=700.0))
    entries = read_ceilings_file(ceilings_path(tmp_path)).entries
    assert set(entries) == {"other", environment_key(cpu)}
    stored = lookup_ceilings(tmp_path, cpu)
    assert stored is not None and stored.device == "cuda"
    assert stored.matmul_ceiling("bfloat16") == 700.0 and stored.matmul_ceiling("tf32") == 400.0
    assert stored.matmul_ceiling(None) == 55.0 and stored.matmul_ceiling("fp16") is None
    # a distributed run of the same machine finds the same ceilings (a GPU's ceiling does not
    # depend on how many ranks train)
    assert lookup_ceilings(tmp_path, with_world(cpu, 2, "gloo")) == stored
    assert lookup_ceilings(tmp_path / "elsewhere", cpu) is None
    document = ceilings_document(_gpu_ceilings("k", fp32=1.0))
    assert document.values.unsupported == {"fp16": "an example reason"}
    table = ceilings_table(_gpu_ceilings("k", fp32=55.0, bf16=700.0))
    assert table.columns[0].header == "ceiling" and table.row_count == 4


def test_summary_fraction_and_document_round_trip(tmp_path: Path) -> None:
    environment = collect_fingerprint("cpu", 1)
    key = environment_key(environment)
    ceilings = Ceilings(
        device="cpu",
        device_name="a CPU",
        threads=1,
        fingerprint_key=key,
        measured_at="2026-12-02T10:00:00+00:00",
        matmul={"fp32": _measurement(0.1, 2048)},
    )
    save_ceilings(tmp_path, ceilings)
    stored = lookup_ceilings(tmp_path, environment)

    def summary_of(flops: FlopCount | None, **extra: Any) -> WorkloadSummary:
        return summarize_workload(
            [_repeat(0.01)],
            samples_per_step=32,
            tokens_per_step=None,
            flops=flops,
            compute_dtype=extra.pop("compute_dtype", "fp32"),
            device="cpu",
            gpu_name=None,
            **extra,
        )

    # on a CPU the fp32 figure is the ceiling whatever the dtype
    summary = summary_of(None, compute_dtype="bf16", ceilings=stored)
    assert summary.ceiling_tflops == 0.1 and summary.ceiling_fraction is None  # no FLOP count
    flops = FlopCount(counted_per_step=10**9, used="counted")  # 1 GFLOP in 10 ms: 0.1 TFLOP/s
    summary = summary_of(flops, ceilings=stored)
    assert summary.ceiling_fraction == pytest.approx(1.0)
    assert summary.mfu is None and summary.mfu_reason  # MFU stays undefined on a CPU
    bare = summary_of(flops)
    assert bare.ceiling_tflops is None and bare.ceiling_fraction is None


def test_corrupt_entries_are_refused_with_the_fix(tmp_path: Path) -> None:
    path = ceilings_path(tmp_path)
    path.parent.mkdir()
    for text in (
        "[]",
        '{"k": 1}',
        '{"k": {"format": 1, "measured_at": "x", "device": "cpu", "values": {}}}',
        '{"k": {"format": 1, "measured_at": "x", "device": "cpu", "perfgate_version": "0.1.0", '
        '"fingerprint": {}, "values": {"device": "cpu", "device_name": null, "threads": 1, '
        '"matmul_tflops": {"fp32": {"median": -1, "min": 1, "max": 1, "samples": [1], '
        '"size": 1}}}}}',
    ):
        path.write_text(text)
        with pytest.raises(UsageError) as raised:
            read_ceilings_file(path)
        assert str(path) in raised.value.one_line() and "\n" not in raised.value.one_line()
        assert "rerun `perfgate doctor --peak`" in raised.value.one_line()


FORMAT_1 = {
    "k": {
        "format": 1,
        "measured_at": "2026-12-01T10:00:00+00:00",
        "perfgate_version": "0.1.0",
        "device": "cpu",
        "fingerprint": {"device": "cpu", "threads": 2},
        "values": {
            "device": "cpu",
            "device_name": "a CPU",
            "threads": 2,
            "matmul_tflops": {
                "fp32": {"median": 0.1, "min": 0.09, "max": 0.11, "samples": [0.1], "size": 2048}
            },
            "bandwidth_bytes_per_s": {},
            "unsupported": {},
            "seed": 0,
            "wall_s": 3.0,
        },
    }
}
"""A store written by perfgate before documents had a header (format 1)."""


def test_a_format_1_store_is_migrated_when_read_and_rewritten_as_format_2(tmp_path: Path) -> None:
    path = ceilings_path(tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps(FORMAT_1))
    stored = stored_ceilings(tmp_path, "k")
    assert stored is not None and stored.matmul_tflops == {"fp32": 0.1} and stored.threads == 2
    save_ceilings(tmp_path, _gpu_ceilings("other", fp32=50.0))
    rewritten = json.loads(path.read_text())
    assert rewritten["schema_version"] == 2 and set(rewritten["entries"]) == {"k", "other"}
    assert "format" not in rewritten["entries"]["k"]
    assert rewritten["entries"]["k"]["values"] == FORMAT_1["k"]["values"]


def test_a_result_with_ceiling_fields_matches_the_schema(measured: dict[str, Any]) -> None:
    path = measured["project"] / "r.json"
    if not path.exists():
        pytest.skip("needs the run of test_run_reports_the_fraction_of_the_measured_ceiling")
    data = json.loads(path.read_text())
    validate_document(data)
    data["workloads"][0]["summary"]["ceiling_fraction"] = "high"
    with pytest.raises(UsageError, match="ceiling_fraction"):
        validate_document(data)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none here)")
def test_gpu_ceilings_are_measured() -> None:
    from perfgate.ceilings.bench import measure_gpu

    matmul, bandwidth, unsupported = measure_gpu()
    assert set(matmul) | set(unsupported) == {"fp32", "tf32", "bf16", "fp16"}
    assert all(m.median > 0 and m.size >= 8192 for m in matmul.values())
    assert set(bandwidth) == {"device_copy", "h2d_pinned", "h2d_pageable"}
    assert all(m.median > 1e9 for m in bandwidth.values())


def test_cuda_sampling_recipe_with_host_clock_events() -> None:
    """The GPU timing recipe (untimed first call, one timed call to size a batch, a warm-up
    batch, then one event pair and one synchronisation per sample) with events that read the
    host clock: there is no GPU here, and the recipe's arithmetic is what this checks."""
    from types import SimpleNamespace

    from perfgate.ceilings.bench import cuda_samples

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing
            self.at = 0.0

        def record(self) -> None:
            self.at = time.perf_counter()

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Event) -> float:
            return (end.at - self.at) * 1e3  # milliseconds, as torch.cuda.Event reports

    fake = SimpleNamespace(cuda=SimpleNamespace(Event=Event, synchronize=lambda: None))
    calls: list[float] = []

    def action() -> None:
        calls.append(time.perf_counter())
        time.sleep(0.002)

    rates = cuda_samples(fake, action, 1.0, 3, 0.01)
    assert len(rates) == 3 and all(0 < rate <= 1 / 0.002 for rate in rates)
    batch = (len(calls) - 2) // 4  # first call, sizing call, warm-up batch, 3 sample batches
    assert batch >= 1 and len(calls) == 2 + 4 * batch
