"""The built wheel, installed into a fresh virtual environment outside the repository, runs.

A user installs perfgate with pip, not from a checkout: this builds the sdist and the wheel
from it (``python -m build``, the PEP 517 build a release publishes), installs the wheel with
``--no-deps`` into a new virtual environment under a temporary folder, and runs ``run``,
``compare`` and ``report`` there from a folder that holds no perfgate source, so everything
they need (the schemas, the rules, the templates, the worker module) must come from the wheel. The
dependencies (torch among them) come from this test's own environment through a ``.pth``
line: downloading them again would take minutes and, for torch, the wrong build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtual environment holding only the built wheel."""
    scratch = tmp_path_factory.mktemp("wheel")
    # The release build: the sdist, then the wheel built from that sdist (so a file the sdist
    # forgets fails here, not on a packager's machine).
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(scratch), "."],
        cwd=REPOSITORY, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (sdist,) = scratch.glob("perfgate-*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for shipped in ("LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "PKG-INFO"):
        assert shipped in members, shipped
    assert "0+unknown" not in sdist.name
    (wheel,) = scratch.glob("perfgate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("perfgate/schema/result-v1.json", "perfgate/rules/", "perfgate/templates/"):
        assert any(name.startswith(shipped) for name in names), shipped
    assert any(name.endswith("licenses/LICENSE") for name in names)
    environment = scratch / "env"
    venv.create(environment, with_pip=False)
    site = Path(
        sysconfig.get_path("purelib", vars={"base": str(environment), "platbase": str(environment)})
    )
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    python = environment / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
         str(wheel)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return environment / "bin"


def perfgate(bin_folder: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("PERFGATE_")
    }
    environment.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(bin_folder / "perfgate"), *args],
        cwd=cwd, env={**environment, "COLUMNS": "80"}, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def test_the_installed_wheel_is_the_perfgate_that_runs(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [str(installed / "python"), "-c", "import perfgate; print(perfgate.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(installed.parent)
    version = perfgate(installed, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("perfgate ")
    assert "unknown" not in version.stdout


def test_run_compare_and_report_work_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    fast = ("-w", "mlp", "--preset", "smoke", "--steps", "4", "--warmup", "1", "--repeats", "2",
            "--device", "cpu", "--no-store")  # fmt: skip
    for name in ("base", "head"):
        ran = perfgate(installed, "run", *fast, "--out", f"{name}.json", cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert json.loads((tmp_path / f"{name}.json").read_text())["workloads"][0]["status"] == "ok"
    compared = perfgate(
        installed, "compare", "head.json", "--baseline", "base.json", "--json", "verdict.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert compared.returncode in (ExitCode.OK, ExitCode.REGRESSION, ExitCode.INCONCLUSIVE)
    assert "Traceback" not in compared.stderr
    assert json.loads((tmp_path / "verdict.json").read_text())["schema"] == "perfgate.verdict"
    reported = perfgate(installed, "report", "head.json", "-o", "report.html", cwd=tmp_path)
    assert reported.returncode == 0, reported.stderr
    assert (tmp_path / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
