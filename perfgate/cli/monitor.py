"""``perfgate monitor``: thin command over ``perfgate.monitoring.live``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import guarded, say


def monitor_command(
    command: list[str] = typer.Argument(
        None, metavar="-- CMD...", help="the training job to start and watch"
    ),
    pid: int | None = typer.Option(None, help="watch a running job instead of starting one"),
    feed: Path | None = typer.Option(
        None, help="with --pid: the step feed file the job was started with (PERFGATE_MONITOR_FEED)"
    ),
    port: int = typer.Option(9464, min=0, max=65535, help="port of /metrics"),
    address: str = typer.Option("127.0.0.1", help="address of /metrics (0.0.0.0: every one)"),
    interval: float = typer.Option(0.5, help="seconds between samples (at least 0.2)"),
    window: float = typer.Option(30.0, help="seconds of the rolling window (rates, bound)"),
    gpu: int | None = typer.Option(0, help="NVML index of the GPU to sample"),
    no_gpu: bool = typer.Option(False, "--no-gpu", help="sample no GPU"),
    linger: float = typer.Option(0.0, min=0.0, help="keep serving this long after the job ends"),
) -> None:
    """Serve a live training job's step time, throughput, CPU/GPU telemetry and bound at
    /metrics for Prometheus; exits with the job's exit code."""
    from perfgate.monitoring.live import MonitorRequest, monitor  # lazy: prometheus-client, NVML

    request = MonitorRequest(
        command=command or [],
        pid=pid,
        feed=feed,
        port=port,
        address=address,
        interval_s=interval,
        window_s=window,
        gpu_index=None if no_gpu else gpu,
        linger_s=linger,
    )
    say(f"monitor: http://{address}:{port}/metrics")
    outcome = guarded(lambda: monitor(request))
    say(f"monitor: {outcome.samples} samples, {outcome.steps} steps seen")
    if outcome.returncode is not None:
        # A job ended by signal N exits 128 + N, as a shell would report it.
        code = outcome.returncode
        raise typer.Exit(128 - code if code < 0 else code)
