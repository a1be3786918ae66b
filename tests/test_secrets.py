"""A database URL with a password never appears in any output file or printed line.

The URL goes in the way CI passes it (``PERFGATE_DATABASE_URL``, from a secret) and points at the
real PostgreSQL on 127.0.0.1 (trust authentication: the password is accepted and ignored, so it
can be a recognisable marker). Every command that touches the database runs for real: run (which
stores), db upgrade, ingest, baseline refresh and export, report, compare with every output;
then a URL to a closed port, whose error must name the database without its password. Every
printed line and every file left in the project is searched for the password.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest_db import postgres_admin
from sqlalchemy import text

pytestmark = pytest.mark.slow

PASSWORD = "Sup3r-s3cret-" + secrets.token_hex(4)
ANY_VERDICT = (0, 1, 4)
"""Pass, regression or inconclusive: the verdict of real runs on a shared CPU is not the subject."""
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "gate_project"


@pytest.fixture
def secret_url() -> Iterator[str]:
    """A fresh PostgreSQL database, its URL carrying ``PASSWORD``."""
    admin, detail = postgres_admin()
    if admin is None:
        message = f"PostgreSQL on 127.0.0.1:5432 is unreachable ({detail})"
        if os.environ.get("PERFGATE_REQUIRE_POSTGRES"):
            pytest.fail(message)
        pytest.skip(message)
    name = f"perfgate_s_{secrets.token_hex(6)}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        url = admin.url.set(database=name, password=PASSWORD)
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_the_password_never_leaves_the_secret(secret_url: str, tmp_path: Path) -> None:
    assert PASSWORD in secret_url
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=project, check=True)
    subprocess.run([*git, "add", "-A"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "project"], cwd=project, check=True)
    printed: list[str] = []

    def perfgate(*args: str, url: str = secret_url, expect: tuple[int, ...] = (0,)) -> None:
        environment = {**os.environ, "PERFGATE_DATABASE_URL": url, "COLUMNS": "200"}
        environment.pop("GITHUB_STEP_SUMMARY", None)
        completed = subprocess.run(
            [sys.executable, "-m", "perfgate", *args],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=600,
            env=environment,
        )
        printed.append(completed.stdout + completed.stderr)
        assert completed.returncode in expect, completed.stdout + completed.stderr

    quick = ("--device", "cpu", "--repeats", "2", "--steps", "4", "--warmup", "1")
    perfgate("db", "upgrade")
    for name in ("a", "b", "c"):
        perfgate("run", *quick, "--out", f"{name}.json")
    perfgate("ingest", "a.json")
    perfgate("baseline", "refresh", "--branch", "main")
    perfgate("baseline", "show", "--branch", "main")
    perfgate("baseline", "export", "--branch", "main")
    perfgate("report", "c.json", "-o", "report.html")
    outputs = ("--json", "v.json", "--markdown", "c.md", "--html", "h.html")
    perfgate("compare", "c.json", "--baseline", "a.json", *outputs, expect=ANY_VERDICT)
    perfgate("compare", "c.json", *outputs, expect=ANY_VERDICT)  # the database's baseline
    closed = secret_url.replace("127.0.0.1:5432", "127.0.0.1:1")
    perfgate("run", *quick, "--out", "d.json", url=closed, expect=(3,))
    assert "127.0.0.1:1" in printed[-1]  # the error names the database...
    for output in printed:
        assert PASSWORD not in output  # ...never its password
    files = [p for p in project.rglob("*") if p.is_file() and ".git" not in p.parts]
    assert {"report.html", "h.html", "v.json", "c.md", "d.json"} <= {p.name for p in files}
    for path in files:
        assert PASSWORD.encode() not in path.read_bytes(), path
