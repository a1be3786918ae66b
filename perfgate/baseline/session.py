"""``perfgate baseline refresh / show / export`` as library calls: each reads the configuration
(None: the nearest perfgate.toml or pyproject.toml upwards) and works on its database."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from perfgate.baseline.export import export_baselines
from perfgate.baseline.refresh import RefreshPolicy, refresh_baselines
from perfgate.config import Config, load_config
from perfgate.documents.refresh import REFRESH, RefreshReport
from perfgate.errors import UsageError
from perfgate.files import check_writable, write_json_atomic
from perfgate.store.engine import make_engine
from perfgate.store.history import list_baselines
from perfgate.store.tables import BaselineRow


def refresh_session(
    config_path: Path | None,
    branch: str,
    *,
    window: int,
    min_segment: int,
    min_runs: int,
    json_out: Path | None = None,
) -> RefreshReport:
    """Detect change points in the branch's history and move baselines after confirmed steps;
    inconsistent limits are a usage error before the configuration is read. The report is
    also written to ``json_out`` when given (the nightly job bisects its new steps)."""
    if window < 1 or min_runs < 1 or min_runs > window:
        raise UsageError(
            f"--window {window} / --min-runs {min_runs} are inconsistent",
            "use 1 <= --min-runs <= --window",
        )
    if json_out is not None:
        check_writable(json_out, "--json")  # before the database is touched
    settings = load_config(config_path)
    policy = RefreshPolicy(window=window, min_segment=min_segment, min_runs=min_runs)
    report = refresh_baselines(_engine(settings), branch, policy)
    if json_out is not None:
        write_json_atomic(json_out, REFRESH.dump(report), option="--json")
    return report


def stored_baselines(
    config_path: Path | None, branch: str | None = None, include_retired: bool = False
) -> list[BaselineRow]:
    """The baselines in the database (live only unless ``include_retired``), optionally of one
    branch, with how and why each was set."""
    settings = load_config(config_path)
    with Session(_engine(settings)) as session:
        return list_baselines(session, branch=branch, include_retired=include_retired)


def export_session(
    config_path: Path | None, branch: str, out_dir: Path, *, allow_empty: bool = False
) -> tuple[list[Path], list[Path]]:
    """Write ``<out_dir>/<suite>/<workload>@<preset>-<key prefix>.json`` for every live
    baseline of the branch (a relative ``out_dir`` is under the project root); (written,
    removed) snapshot paths."""
    settings = load_config(config_path)
    target = out_dir if out_dir.is_absolute() else settings.root / out_dir
    if target.exists() and not target.is_dir():
        raise UsageError(f"--out-dir {target} is not a folder", "give a folder path")
    return export_baselines(_engine(settings), branch, target, allow_empty=allow_empty)


def _engine(config: Config) -> Engine:
    return make_engine(config.database_url, config.root)
