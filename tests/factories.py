"""Maximal documents: every optional field of every model set to a plausible value.

A test that builds a result, a verdict or a snapshot by hand starts from these (``replace``
what it varies), and ``tests/test_documents.py`` writes each one, reads it back through its
format's reader and checks it comes back equal: the schema round trip of every field.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfgate.documents.advice import (
    Advice,
    AdviceReport,
    InferredFact,
    Verification,
    WorkloadAdvice,
)
from perfgate.documents.bisect import BisectProbe, BisectReport
from perfgate.documents.calibration import Calibration, CalibrationReport
from perfgate.documents.ceilings import (
    CeilingsEntry,
    CeilingsReport,
    CeilingsStore,
    CeilingValues,
    FixSpeedup,
    RateSamples,
)
from perfgate.documents.diagnosis import Diagnosis, DiagnosisReport, WorkloadDiagnosis
from perfgate.documents.refresh import KeyRefresh, RefreshReport, RefreshStep
from perfgate.documents.result import (
    FlopCount,
    RankResult,
    RepeatConditions,
    RepeatResult,
    RunResult,
    RunSettings,
    SourceInfo,
    WorkCounters,
    WorkloadResult,
    WorkloadSummary,
)
from perfgate.documents.snapshot import BaselineSnapshot, MetricStatistics, SnapshotRun
from perfgate.documents.trace_diff import TraceChange, TraceDiff, TraceSide
from perfgate.documents.verdict import (
    Attribution,
    CompareVerdict,
    ErrorDocument,
    MetricComparison,
    Mover,
    SideQuality,
    WorkChange,
    WorkloadVerdict,
)
from perfgate.documents.worker import (
    CommunicationWindow,
    CountedFlops,
    Measurement,
    ProfileReport,
    ProfilerWindow,
    RankPlace,
    StepClockSpec,
    WorkerReport,
    WorkerSpec,
)

RUN_ID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
HASH = "ab" * 32
ENVIRONMENT: dict[str, Any] = {
    "device": "cuda",
    "cpu": {"model": "x86", "physical_cores": 2},
    "gpu": {"model": "NVIDIA H200", "count": 1, "nvml_index": 0},
    "torch": {"version": "2.13.0"},
    "distributed": {"world_size": 2, "backend": "nccl"},
}


def repeat(index: int = 0, *, ranks: bool = True) -> RepeatResult:
    """A distributed repeat of a GPU workload with every field measured."""
    steps = [0.0102, 0.0100, 0.0101, 0.0099]
    return RepeatResult(
        index=index,
        status="ok",
        exit_code=0,
        wall_s=2.5,
        timer="cuda_event",
        threads=2,
        first_step_s=0.8,
        warmup_times_s=[0.05, 0.011],
        step_times_s=steps,
        steady_start=1,
        losses=[2.3, 2.2, 2.1, 2.0],
        dataloader_wait_s=[0.0, 0.0001, 0.0, 0.0],
        epoch_restarts=1,
        peak_memory={"rss_bytes": 400_000_000, "cuda_allocated_bytes": 2**30},
        phases={"spawned": 1.0, "start": 1.1, "measure_start": 2.0, "measure_end": 2.1},
        telemetry={"samples": [{"t": 1.0, "cpu": 0.5}]},
        telemetry_summary={"gpu": {"throttled_fraction": 0.0}},
        stderr_tail=None,
        injected_s_per_step=None,
        slowest_rank=1 if ranks else None,
        ranks=[
            RankResult(
                rank=rank,
                median_step_s=0.0101,
                step_times_s=steps,
                steady_start=1,
                dataloader_wait_s=[0.0] * 4,
                peak_memory={"cuda_allocated_bytes": 2**30},
                first_step_s=0.8,
                communication={"share": 0.1, "exposed_share": 0.05} if rank == 0 else None,
            )
            for rank in (0, 1)
        ]
        if ranks
        else None,
        conditions=RepeatConditions(
            samples=4,
            runqueue_wait_share=0.01,
            other_cpu_cores=0.2,
            cpu_pressure_share=0.0,
            steal_share=0.0,
            cpu_mhz=2900.0,
            gpu_other_processes=0,
            gpu_sm_mhz=1980.0,
        ),
    )


def work_counters(**changes: Any) -> WorkCounters:
    """One distributed GPU step's exact work, every counter non-zero."""
    fields: dict[str, Any] = {
        "operators": 412,
        "allocations": 96,
        "allocated_bytes": 3 * 2**20,
        "host_syncs": 2,
        "host_to_device_bytes": 32 * 256 * 8,
        "device_to_host_bytes": 4,
        "collectives": 3,
        "collective_bytes": 4 * 10**6,
        "by_operator": {"aten.mm": 36, "aten.copy_": 12, "c10d.allreduce_": 3},
    }
    return WorkCounters(**{**fields, **changes})


def workload(name: str = "gpt") -> WorkloadResult:
    """A distributed GPU workload with FLOPs, a summary and two repeats."""
    return WorkloadResult(
        name=name,
        version=2,
        kind="user",
        factory="team.bench:make_gpt",
        preset="full",
        definition_hash=HASH,
        knobs={"precision": "bf16", "compile": False},
        params={"layers": 4},
        device="cuda",
        status="ok",
        samples_per_step=32,
        tokens_per_step=32 * 256,
        compute_dtype="bf16",
        flops=FlopCount(
            counted_per_step=10**12,
            analytic_per_step=1.1e12,
            analytic_formula="6N + 12LHQT",
            used="counted",
            by_operator={"aten::mm": 9 * 10**11},
        ),
        setup_info={"parameters": 10**6, "optimizer": {"class": "AdamW", "fused": True}},
        repeats=[repeat(0), repeat(1)],
        summary=WorkloadSummary(
            ok_repeats=2,
            median_step_s=0.0101,
            repeat_medians_s=[0.0101, 0.0100],
            between_repeat_cv=0.01,
            samples_per_s=3168.0,
            tokens_per_s=811_000.0,
            tflops=99.0,
            mfu=0.1,
            mfu_reason=None,
            peak_tflops=989.4,
            peak_memory_bytes=2**30,
            first_step_s=0.8,
            dataloader_wait_share=0.01,
            final_loss=2.0,
            world_size=2,
            rank_spread=0.02,
            communication_share=0.1,
            communication_exposed_share=0.05,
            communication_overlap=0.5,
            rank_imbalance=0.03,
            ceiling_tflops=700.0,
            ceiling_fraction=0.14,
            ceiling_measured_at="2026-12-02T10:00:00+00:00",
        ),
        work=work_counters(),
    )


def run(**changes: Any) -> RunResult:
    """A run with every optional field of the result format set."""
    fields: dict[str, Any] = {
        "run_id": RUN_ID,
        "perfgate_version": "0.1.0",
        "started_at": "2026-12-02T10:00:00+00:00",
        "finished_at": "2026-12-02T10:05:00+00:00",
        "suite": "pr",
        "device": "cuda",
        "settings": RunSettings(
            repeats=2,
            steps=4,
            warmup=2,
            timeout_s=600.0,
            threads=2,
            seed=7,
            shard="1/2",
            inject_slowdown=0.1,
            nproc_per_node=2,
        ),
        "source": SourceInfo(
            commit="c0ffee" * 6 + "abcd",
            branch="feature",
            dirty=False,
            repository="team/project",
            pr_number=42,
            trigger="pr",
            ci="github-actions",
            subject="Make attention faster [skip] `code` <b>",
        ),
        "environment": ENVIRONMENT,
        "workloads": [workload("gpt"), workload("mlp")],
    }
    return RunResult(**{**fields, **changes})


def comparison(metric: str = "step_time_s", **changes: Any) -> MetricComparison:
    """A sequential comparison with every field set (an unbounded detectable change)."""
    fields: dict[str, Any] = {
        "metric": metric,
        "direction": "lower",
        "baseline_median": 0.0101,
        "head_median": 0.0125,
        "ratio": 1.24,
        "ci_low": 1.2,
        "ci_high": 1.28,
        "p_value": 0.001,
        "threshold": 0.05,
        "min_detectable": math.inf,
        "baseline_repeats": 6,
        "head_repeats": 6,
        "verdict": "regression",
        "reasons": ("decided after 6 of at most 40 rounds",),
        "p_adjusted": 0.002,
        "quality": (SideQuality(bimodal=True, cv=0.1, throttled_share=0.0), SideQuality()),
        "baseline_values": (0.01, 0.0101),
        "head_values": (0.0124, 0.0126),
        "method": "sequential",
        "derived_from": None,
        "rounds_needed": 12,
    }
    return MetricComparison(**{**fields, **changes})


def attribution() -> Attribution:
    """Three windows a side: one op slower, one kernel added, one op more frequent."""
    return Attribution(
        windows=3,
        base_step_ms=10.4,
        head_step_ms=12.9,
        movers=[
            Mover(
                side="op",
                name="aten::copy_",
                change="slower",
                base_calls=12.0,
                head_calls=48.0,
                base_us=760.0,
                head_us=3860.0,
                delta_low_us=2900.0,
                delta_high_us=3300.0,
                step_share=0.298,
            ),
            Mover(
                side="kernel",
                name="void at::native::elementwise_kernel<128, 4>",
                change="added",
                base_calls=0.0,
                head_calls=12.0,
                base_us=0.0,
                head_us=90.0,
                delta_low_us=80.0,
                delta_high_us=101.0,
                step_share=0.0087,
            ),
            Mover(
                side="op",
                name="aten::item",
                change="more frequent",
                base_calls=1.0,
                head_calls=2.0,
                base_us=4.0,
                head_us=9.0,
                delta_low_us=-2.0,
                delta_high_us=12.0,
                step_share=0.0005,
            ),
        ],
        omitted=2,
    )


def verdict(**changes: Any) -> CompareVerdict:
    """A verdict with a workload of every status."""
    fields: dict[str, Any] = {
        "overall": "regression",
        "head_run_id": RUN_ID,
        "workloads": [
            WorkloadVerdict(
                name="gpt",
                status="compared",
                baseline_origin="baselines/pr/x.json",
                comparisons=[
                    comparison(),
                    comparison("samples_per_s", direction="higher", derived_from="step_time_s"),
                ],
                notes=["re-measured as an interleaved A/B"],
                work_changes=[
                    WorkChange(counter="host_syncs", base=2, head=3),
                    WorkChange(counter="aten._local_scalar_dense", base=1, head=2),
                ],
                attribution=attribution(),
            ),
            WorkloadVerdict(name="mlp", status="missing", notes=["not measured at head"]),
            WorkloadVerdict(name="bert", status="definition_changed"),
            WorkloadVerdict(name="new", status="no_baseline"),
            WorkloadVerdict(name="odd", status="loss_mismatch", notes=["final loss differs"]),
        ],
        "environment_differences": ["torch: 2.11.0 → 2.13.0"],
        "method": "interleaved",
        "notes": ["suite, thresholds and policy read from main"],
        "head_commit": "c0ffee" * 6 + "abcd",
        "head_subject": "Make attention faster",
        "inconclusive_policy": "fail",
        "base_commit": "ba5e" * 10,
    }
    return CompareVerdict(**{**fields, **changes})


def error() -> ErrorDocument:
    return ErrorDocument(exit_code=3, problem="head workloads did not run", fix="fix them")


def calibration(**changes: Any) -> Calibration:
    fields: dict[str, Any] = {
        "workload": "gpt",
        "preset": "smoke",
        "definition_hash": HASH,
        "knobs": {"precision": "bf16"},
        "device": "cpu",
        "environment_key": "cd" * 32,
        "created_at": "2026-12-02T10:00:00+00:00",
        "repeats": 6,
        "steps": 12,
        "warmup": 3,
        "step_median_s": 0.01,
        "within_cv": 0.02,
        "between_sigma": 0.05,
        "repeat_values_s": (0.0101, 0.0099),
        "threshold": 0.05,
        "configured_repeats": 5,
        "min_detectable": math.inf,
        "recommended_threshold": 0.12,
        "target": 0.02,
        "repeats_for_target": None,
        "repeats_for_target_tuned": 40,
    }
    return Calibration(**{**fields, **changes})


def calibration_report() -> CalibrationReport:
    return CalibrationReport(calibrations=[calibration(), calibration(workload="mlp")])


def rate(median: float, size: int) -> RateSamples:
    return RateSamples(
        median=median, min=median * 0.9, max=median * 1.1, samples=(median,), size=size
    )


def ceiling_values() -> CeilingValues:
    return CeilingValues(
        device="cuda",
        device_name="NVIDIA H200",
        threads=8,
        matmul_tflops={"fp32": rate(50.0, 8192), "bf16": rate(700.0, 8192)},
        bandwidth_bytes_per_s={"device_copy": rate(4e12, 2**30)},
        unsupported={"fp8": "not measured"},
        seed=1,
        wall_s=12.5,
    )


def ceilings_report() -> CeilingsReport:
    return CeilingsReport(
        perfgate_version="0.1.0",
        fingerprint_key="cd" * 32,
        measured_at="2026-12-02T10:00:00+00:00",
        fingerprint={"device": "cuda", "gpu_model": "NVIDIA H200"},
        values=ceiling_values(),
    )


def ceilings_store() -> CeilingsStore:
    entry = CeilingsEntry(
        measured_at="2026-12-02T10:00:00+00:00",
        perfgate_version="0.1.0",
        device="cuda",
        fingerprint={"device": "cuda"},
        values=ceiling_values(),
    )
    fix = FixSpeedup(
        benchmark="sdpa",
        signature="sdpa cpu fp32 32x64x64x16 causal p=0",
        speedup=1.05,
        low=0.99,
        high=1.15,
        ratios=(1.05, 0.99, 1.15, 1.04, 1.06, 1.02, 1.08),
        basis="scaled_dot_product_attention against the explicit chain",
        measured_at="2026-12-04T10:00:00+00:00",
    )
    return CeilingsStore(
        entries={"cd" * 32: entry, "ef" * 32: entry}, fixes={"cd" * 32: {fix.signature: fix}}
    )


def snapshot() -> BaselineSnapshot:
    return BaselineSnapshot(
        key="12" * 32,
        suite="pr",
        workload="gpt",
        preset="smoke",
        definition_hash=HASH,
        knobs={"precision": "bf16"},
        branch="main",
        environment_key="cd" * 32,
        environment=ENVIRONMENT,
        created_at="2026-12-02T03:00:00+00:00",
        reason="first baseline for this key (3 runs)",
        method={"metric": "step_time_s", "window": 10},
        metrics={
            "step_time_s": MetricStatistics(
                median=0.0101,
                run_medians=[0.01, 0.0101, 0.0102],
                repeat_values=[0.01, 0.0101, 0.0102, 0.0099],
                runs=3,
                repeats=4,
            )
        },
        runs=[SnapshotRun(run_id=RUN_ID, commit="abc", started_at="2026-12-01", used=True)],
    )


def diagnosis(**changes: Any) -> Diagnosis:
    fields: dict[str, Any] = {
        "bound": "compute",
        "device": "cuda",
        "confidence": "high",
        "reason": "the GPU is busy 95% of the step, 80% of it in matmul kernels",
        "evidence": {"gpu_busy": 0.95, "compute_kernel_share": 0.8, "mfu": 0.41},
    }
    return Diagnosis(**{**fields, **changes})


def diagnosis_report() -> DiagnosisReport:
    """A workload diagnosed with a profiled window, one from its timed run, one that failed."""
    return DiagnosisReport(
        result="results/head.json",
        workloads=[
            WorkloadDiagnosis(
                name="gpt", preset="full", status="ok", diagnosis=diagnosis(), profiled=True
            ),
            WorkloadDiagnosis(
                name="mlp",
                preset="smoke",
                status="ok",
                diagnosis=diagnosis(bound="host", device="cpu", confidence="medium"),
                profiled=False,
            ),
            WorkloadDiagnosis(
                name="broken",
                preset="smoke",
                status="error",
                diagnosis=None,
                profiled=False,
                error="ValueError: bad shape",
            ),
        ],
    )


def advice(rule_id: str = "optimizer-not-fused", **changes: Any) -> Advice:
    """Verified advice with every field set (evidence of every value type)."""
    fields: dict[str, Any] = {
        "rule_id": rule_id,
        "title": "The optimizer step is not fused",
        "category": "optimizer",
        "confidence": "high",
        "saving": 0.1219,
        "tier": "high",
        "evidence": {
            "optimizer_share": 0.14,
            "optimizer_fused": False,
            "param_count": 1_000_000,
            "matmul_dtype": "bf16",
        },
        "fix": "Construct the optimizer with fused=True.",
        "snippet": "optimizer = torch.optim.AdamW(params, fused=True)\n",
        "references": ("https://pytorch.org/docs/stable/optim.html",),
        "verify_knobs": {"optimizer": "fused", "batch_size": 32, "compile": True, "x": None},
        "status": "verified",
        "notes": ("estimated speed-up 0.9 is below 1: no saving expected",),
        "pattern": "a per-parameter optimizer loop",
        "location": "Trainer · train.py(88): step",
        "estimate_basis": "the rule's constant 2x",
    }
    return Advice(**{**fields, **changes})


def verification(rule_id: str = "optimizer-not-fused", **changes: Any) -> Verification:
    """A measured verification with every field set."""
    fields: dict[str, Any] = {
        "rule_id": rule_id,
        "workload": "gpt",
        "knobs": {"optimizer": "fused", "batch_size": 32},
        "outcome": "verified",
        "reason": "13 % faster (interval 4 % to 18 %)",
        "rounds": 6,
        "speedup": 1.13,
        "speedup_ci": (1.04, 1.18),
        "p_value": 0.002,
        "baseline_step_s": 0.0125,
        "changed_step_s": 0.011,
        "per_sample": True,
        "loss_parity": True,
    }
    return Verification(**{**fields, **changes})


def workload_advice(name: str = "gpt", **changes: Any) -> WorkloadAdvice:
    """A profiled, diagnosed and verified workload's advice with every field set."""
    fields: dict[str, Any] = {
        "name": name,
        "preset": "full",
        "knobs": {"optimizer": "plain", "precision": "off", "batch_size": None},
        "status": "ok",
        "error": None,
        "evidence": {"device": "cuda", "optimizer_share": 0.14, "optimizer_fused": False},
        "advice": [advice(), advice("tf32-disabled", status="refuted", saving=0.01, tier="low")],
        "verifications": [
            verification(),
            verification("tf32-disabled", outcome="refuted", speedup=0.99, loss_parity=None),
        ],
        "trace_path": Path("traces/gpt.trace.json"),
        "diagnosis": diagnosis(),
        "source": "traces/gpt.pt.trace.json.gz",
        "inferred": [
            InferredFact(name="compiled", value=False, reason="no compiled region"),
            InferredFact(name="cudnn_benchmark", value=False, reason="default", assumed=True),
            InferredFact(name="batch_size", value=16.0, reason="leading dimension"),
        ],
        "changes": trace_diff(),
    }
    return WorkloadAdvice(**{**fields, **changes})


def trace_diff() -> TraceDiff:
    """Two traces compared, one mover of each side."""
    return TraceDiff(
        before=TraceSide(path="before.json", steps=5, step_ms=12.5, device="cuda"),
        after=TraceSide(path="after.json.gz", steps=10, step_ms=13.0, device="cuda"),
        step_change=0.04,
        changes=[
            TraceChange(
                side="op",
                name="aten::copy_",
                change="added",
                before_calls=0.0,
                after_calls=48.0,
                before_us=0.0,
                after_us=310.0,
                step_share=0.0248,
            ),
            TraceChange(
                side="kernel",
                name="void gemm<float>",
                change="more frequent",
                before_calls=2.0,
                after_calls=2.5,
                before_us=100.0,
                after_us=101.0,
                step_share=0.00008,
            ),
        ],
        omitted=3,
    )


def advice_report() -> AdviceReport:
    """Advice for a workload with everything set and for one whose profiling failed."""
    failed = WorkloadAdvice(
        name="broken", preset="smoke", knobs={}, status="error", error="ValueError: bad shape"
    )
    return AdviceReport(device="cuda", workloads=[workload_advice(), failed])


def worker_spec(**changes: Any) -> WorkerSpec:
    """A distributed first repeat's spec with every field set (a real one profiles or times,
    not both)."""
    fields: dict[str, Any] = {
        "name": "gpt",
        "factory": "team.bench:make_gpt",
        "python_path": ["/work/project"],
        "preset": "full",
        "params": {"layers": 4, "lr": 0.001, "name": "tiny"},
        "knobs": {"precision": "bf16", "compile": False, "batch_size": 32, "x": None, "lr": 0.1},
        "device": "cuda",
        "seed": 7,
        "threads": 2,
        "warmup": 2,
        "steps": 4,
        "timeout_s": 600.0,
        "count_flops": True,
        "inject_slowdown": 0.1,
        "nproc_per_node": 2,
        "environment_allow": ["HF_HOME"],
        "step_clock": StepClockSpec(between=0.02, within=0.01, load=1.5, step=0.001, seed=99),
        "clock_witness": Path("/tmp/scratch/gpt-0.clock"),
        "communication": ProfilerWindow(steps=3, trace_path=Path("/tmp/scratch/gpt-0.comm.json")),
        "profile": ProfilerWindow(steps=5, trace_path=Path("/tmp/scratch/gpt.trace.json")),
        "script": ["/work/project/train.py", "--max-iters", "100"],
    }
    return WorkerSpec(**{**fields, **changes})


def measurement(**changes: Any) -> Measurement:
    """A timed GPU repeat's measurement (for :func:`worker_spec`'s 2 warm-up and 4 measured
    steps) with every field set."""
    fields: dict[str, Any] = {
        "timer": "cuda_event",
        "threads": 2,
        "first_step_s": 0.8,
        "warmup_times_s": [0.8, 0.011],
        "step_times_s": [0.0102, 0.0100, 0.0101, 0.0099],
        "steady_start": 1,
        "dataloader_wait_s": [0.0, 0.0001, 0.0, 0.0],
        "losses": [2.4, 2.3, 2.2, None, 2.1, 2.0],
        "inject_reference_s": 0.011,
        "injected_s_per_step": 0.0011,
        "epoch_restarts": 1,
        "peak_memory": {"rss_bytes": 400_000_000, "cuda_allocated_bytes": 2**30},
        "phases": {"start": 1.1, "imports_done": 1.5, "measure_start": 2.0, "measure_end": 2.1},
        "samples_per_step": 32,
        "tokens_per_step": 32 * 256,
        "compute_dtype": "bf16",
        "analytic_flops_per_step": 1.1e12,
        "analytic_formula": "6N + 12LHQT",
        "flops": CountedFlops(counted_per_step=10**12, by_operator={"aten.mm": 9 * 10**11}),
        "applied_knobs": {"precision": "bf16", "compile": False},
        "setup_info": {"parameters": 10**6, "optimizer": {"class": "AdamW", "fused": True}},
        "communication": CommunicationWindow(
            device="cuda",
            backend="nccl",
            steps=3,
            window_us=30000.0,
            compute_us=24000.0,
            compute_us_per_step=[8000.0, 8100.0, 7900.0],
            communication_us=9000.0,
            exposed_us=3000.0,
            collectives=12,
            share=0.3,
            exposed_share=0.1,
            overlap=0.6667,
        ),
        "work": work_counters(),
    }
    return Measurement(**{**fields, **changes})


def worker_report(**changes: Any) -> WorkerReport:
    """Rank 1's report with every field set (a real one holds a measurement or a profile, and
    an error only when it failed)."""
    fields: dict[str, Any] = {
        "status": "ok",
        "error": "RuntimeError: only when it failed",
        "failed_at": 1.7e9,
        "rank": RankPlace(rank=1, world_size=2, backend="nccl"),
        "measurement": measurement(),
        "profile": ProfileReport(
            trace_path=Path("/tmp/scratch/gpt.trace.rank1.json"),
            profiled_steps=5,
            threads=2,
            applied_knobs={"precision": "bf16"},
            facts={"device": "cuda", "batch_size": 32.0, "optimizer_fused": True},
        ),
    }
    return WorkerReport(**{**fields, **changes})


def bisect_report() -> BisectReport:
    """A bisection that found its culprit, with every field set."""
    commits = [f"{index:x}" * 40 for index in range(1, 6)]
    effect = BisectProbe(
        base=commits[2], head=commits[3], state="regressed", workload="gpt", ratio=1.25,
        ci_low=1.2, ci_high=1.31, rounds=14, seconds=41.5,
    )  # fmt: skip
    return BisectReport(
        good=commits[0],
        bad=commits[-1],
        commits=commits,
        workloads=["gpt"],
        conclusion="found",
        first_bad=commits[3],
        last_good=commits[2],
        culprit_subject="Copy the inputs `contiguous` <b>",
        effect=effect,
        work_changes=[WorkChange(counter="aten.clone", base=0, head=1)],
        attribution=attribution(),
        probes=[
            replace(effect, base=commits[0], head=commits[4]),
            BisectProbe(
                base=commits[0],
                head=commits[2],
                state="unchanged",
                workload="gpt",
                ratio=1.0,
                ci_low=0.97,
                ci_high=1.03,
                rounds=30,
                seconds=80.0,
            ),
            BisectProbe(base=commits[2], head=commits[3], state="inconclusive", workload=None),
            effect,
        ],
        notes=["a note"],
    )


def refresh_report() -> RefreshReport:
    """A refresh that moved one baseline after a new step and left another key short."""
    step = RefreshStep(
        index=5, metric="step_time_s", median_before=0.02, median_after=0.025,
        run_before="run-4", run_after="run-5", commit_before="a" * 40, commit_after="b" * 40,
        new=True,
    )  # fmt: skip
    return RefreshReport(
        branch="main",
        refreshed_at="2026-12-07T03:40:00+00:00",
        keys=[
            KeyRefresh(
                key="c" * 64,
                workload="gpt",
                suite="nightly",
                action="moved",
                reason="change point: step time +25.0% from commit aaaa to bbbb",
                runs_in_history=10,
                baseline_id=7,
                change_points=[replace(step, index=2, new=False, commit_before=None), step],
            ),
            KeyRefresh(
                key="d" * 64,
                workload="mlp",
                suite=None,
                action="insufficient",
                reason="2 stable runs, 3 needed",
                runs_in_history=2,
            ),
        ],
    )
