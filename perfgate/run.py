"""``perfgate run`` as a library call: plan, measure, write the document, store it.

The result document is written (atomically) before anything touches the database, so a failure
of a later step — an unreachable database, a crash while storing — never loses a measurement.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate import __version__
from perfgate.ceilings.store import lookup_ceilings
from perfgate.config import Config, load_config
from perfgate.documents.result import RunResult, RunSettings, write_result
from perfgate.errors import InfrastructureError, UsageError
from perfgate.files import check_writable
from perfgate.runner.device import resolve_device
from perfgate.runner.forkserver import start_method
from perfgate.runner.launch import run_world
from perfgate.runner.orchestrator import RunObserver, run_workloads, warm_launcher
from perfgate.runner.plan import PlannedWorkload, Selection, prepare
from perfgate.runner.source import collect_source
from perfgate.telemetry.fingerprint import collect_fingerprint, with_world

RunWatch = Callable[[], AbstractContextManager[RunObserver | None]]
"""Opens the watcher of the measuring (a progress display) for as long as the repeats run."""


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """What a command asks to have measured, passed whole: the configuration file, the
    selection, the device and where the result document goes."""

    config: Path | None = None
    """The configuration file; None: the nearest perfgate.toml or pyproject.toml upwards."""
    selection: Selection = field(default_factory=Selection)
    device: str | None = None
    """cpu, cuda or auto; None: the configuration's."""
    out: Path | None = None
    store: bool = True
    trigger: str | None = None


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """What ``perfgate run`` produced and where it went."""

    result: RunResult
    path: Path
    stored_in: str | None
    """The database URL (password masked) the run was stored in; None with ``--no-store``."""


def default_output_path(root: Path, run_id: str) -> Path:
    """``.perfgate/results/<UTC time>-<run id prefix>.json`` under the project root."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return root / ".perfgate" / "results" / f"{stamp}-{run_id[:8]}.json"


def execute_run(
    config: Config,
    selection: Selection,
    *,
    device: str,
    out: Path | None,
    store: bool,
    trigger: str | None = None,
    observer: RunObserver | None = None,
) -> RunOutcome:
    """Measure the selection, write the document, and store it unless ``store`` is false."""
    if trigger not in (None, "pr", "nightly", "manual"):
        raise UsageError(f"unknown trigger {trigger!r}", "use pr, nightly or manual")
    plan, settings = prepare(config, selection)
    device = resolve_device(device)
    run_id = str(uuid.uuid4())
    if store:  # an unusable database URL fails now, not after the measuring
        from perfgate.store.engine import parse_url  # lazy: the database stack, when storing

        parse_url(config.database_url)
    path = out or default_output_path(config.root, run_id)
    check_writable(path, "--out")
    with warm_launcher(plan, settings, device) as launcher:
        environment = run_fingerprint(plan, settings, device)
        # Before measuring: a corrupt ceilings file is a usage error, nothing measured yet.
        ceilings = lookup_ceilings(config.root, environment)
        started = utc_now()
        workloads = run_workloads(
            plan, settings, device, environment, observer, ceilings, launcher=launcher
        )
    result = RunResult(
        run_id=run_id,
        perfgate_version=__version__,
        started_at=started,
        finished_at=utc_now(),
        suite=None if selection.workloads else (selection.suite or config.suite),
        device=device,
        settings=settings,
        source=collect_source(config.root, os.environ, trigger),
        environment=environment,
        workloads=workloads,
    )
    write_result(path, result)
    stored_in = _store(config, result, path) if store else None
    return RunOutcome(result=result, path=path, stored_in=stored_in)


def run_session(request: RunRequest, progress: RunWatch = nullcontext) -> RunOutcome:
    """``perfgate run``: read the configuration, then measure under ``progress`` (opened once
    the configuration is read), write the document and store it unless asked not to."""
    config = load_config(request.config)
    with progress() as observer:
        return execute_run(
            config,
            request.selection,
            device=request.device or config.device,
            out=request.out,
            store=request.store,
            trigger=request.trigger,
            observer=observer,
        )


def _store(config: Config, result: RunResult, path: Path) -> str:
    """Store the run; the document stays on disk whatever happens here."""
    from perfgate.store.engine import StoreUnavailable, masked_url  # lazy: the database stack
    from perfgate.store.ingest import store_run  # lazy: as above (run --no-store needs neither)

    try:
        store_run(config.database_url, result, root=config.root)
    except StoreUnavailable as exc:
        raise InfrastructureError(
            f"result kept at {path}, but the database {masked_url(config.database_url)} "
            f"could not store it ({exc})",
            f"run `perfgate ingest {path}` once the database is reachable",
        ) from None
    return masked_url(config.database_url)


def utc_now() -> str:
    """Now, in UTC, to the second: the timestamps of result documents."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_fingerprint(
    plan: Sequence[PlannedWorkload], settings: RunSettings, device: str
) -> dict[str, Any]:
    """The run's environment fingerprint, with its world size and backend when it has
    distributed workloads (both are part of what a baseline is keyed by), and how its
    single-process workers start (``fork`` server or ``spawn``: shown, never keyed)."""
    environment = {
        **collect_fingerprint(device, settings.threads),
        "worker_start": start_method(os.environ),
    }
    world = run_world(plan, settings.nproc_per_node, device)
    return with_world(environment, *world) if world else environment
