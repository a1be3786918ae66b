"""``perfgate run --no-store`` must work where no database library is installed (GPU images)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROBE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from perfgate.cli import app  # the CLI module itself
    from perfgate.config import load_config
    from perfgate.run import execute_run
    from perfgate.runner.plan import Selection

    outcome = execute_run(
        load_config(), Selection(workloads=["mlp"], repeats=1, steps=2, warmup=1),
        device="cpu", out=Path(sys.argv[1]), store=False,
    )
    assert outcome.stored_in is None and outcome.path.exists()
    database = {"sqlalchemy", "sqlmodel", "alembic", "psycopg", "pydantic"}
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in database)
    print("DB-MODULES:", loaded)
    """
)


def test_no_store_run_imports_no_database_code(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "r.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert "DB-MODULES: []" in completed.stdout
