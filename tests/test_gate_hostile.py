"""Hostile pull requests against the documented PR path (``scripts/pr-gate.sh`` → ``perfgate
gate``): each makes its workload slower AND tries to escape the gate; each must now fail.

Found on main before issue 16 (each passed with exit 0 while 25-50 % slower):

- the workload dropped from, or renamed in, the pull request's own suite;
- a docstring reworded in the factory's file (a new definition hash: "no baseline");
- the factory renamed (the workload cannot be measured at head at all);
- ``ab_rounds`` cut in the pull request's configuration (3 rounds: a usage error, not a verdict);
- the suite renamed to a path out of the checkout (``../../../tmp/flattering``), where snapshots
  would be read from;
- a database with flattering baselines committed by a pull request that gets no secrets;
- the measured code rewriting the gate's output files (``head.json``, ``verdict.json``,
  ``comment.md``) from a process it detached;
- the measured code reading the job's secrets from its environment;
- the measured code hiding its extra time from ``time.perf_counter``.

And the same hostile edits without the slowdown pass: the gate judges performance, not form.
Steps run on the deterministic clock (``conftest_gate``) except the clock attack itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest_db import postgres_database
from conftest_gate import (
    SLOWER,
    Edits,
    compare_code,
    git,
    new_repository,
    open_pr,
    perfgate,
    run_gate,
)

from perfgate.compare.comment import render_comment

pytestmark = pytest.mark.slow
pytest_plugins = ["conftest_gate", "conftest_db"]

(SLOWER_EDIT,) = SLOWER.values()
DROPPED: Edits = {"pyproject.toml": ('pr = ["sleepy"]', 'pr = ["mlp@smoke"]')}
RENAMED: Edits = {
    "pyproject.toml": [
        ('pr = ["sleepy"]', 'pr = ["sleepier"]'),
        ("[tool.perfgate.workloads.sleepy]", "[tool.perfgate.workloads.sleepier]"),
    ]
}
FEWER_ROUNDS: Edits = {"pyproject.toml": ("ab_rounds = 4", "ab_rounds = 3")}
REWORDED: Edits = {
    "sleepy.py": ('"""perfgate\'s workload protocol."""', '"""The workload protocol, reworded."""')
}
PATH_NAMED: Edits = {
    "pyproject.toml": [
        ('suite = "pr"', 'suite = "../../../tmp/flattering"'),
        ('pr = ["sleepy"]', '"../../../tmp/flattering" = ["sleepy"]'),
    ]
}
"""The suite renamed to a path out of the checkout, where snapshots would be looked up."""


@pytest.mark.parametrize(
    "escape",
    [DROPPED, RENAMED, FEWER_ROUNDS, REWORDED, PATH_NAMED],
    ids=[
        "dropped-from-suite",
        "renamed-in-config",
        "ab-rounds-cut",
        "docstring-reworded",
        "suite-named-as-a-path",
    ],
)
def test_a_slower_pr_cannot_escape_through_its_own_configuration_or_definition(
    gate_repo: Path, escape: Edits
) -> None:
    open_pr(gate_repo, f"escape-{abs(hash(str(escape)))}", {**SLOWER, **escape})
    code, comment, log, out = run_gate(gate_repo)
    assert code == 1, log[-3000:]
    assert comment.startswith("## perfgate: regression"), comment
    verdict = json.loads((out / "verdict.json").read_text())
    (sleepy,) = [w for w in verdict["workloads"] if w["name"] == "sleepy"]
    (step,) = [c for c in sleepy["comparisons"] if c["metric"] == "step_time_s"]
    assert step["verdict"] == "regression" and step["method"] == "sequential"
    assert step["head_repeats"] <= 4  # main's ab_rounds, whatever the PR's config says
    if escape is REWORDED:
        assert "its definition changed at head" in " ".join(sleepy["notes"])


def test_the_same_edits_without_the_slowdown_pass(gate_repo: Path) -> None:
    open_pr(gate_repo, "escapes-but-not-slower", {**RENAMED, **FEWER_ROUNDS, **REWORDED})
    code, comment, log, out = run_gate(gate_repo)
    assert code == 0, log[-3000:]
    assert compare_code(out) == 0 and comment.startswith("## perfgate: pass"), comment


def test_a_factory_renamed_at_head_is_missing_and_fails(gate_repo: Path) -> None:
    renamed: Edits = {
        "sleepy.py": ("def make_sleepy(", "def make_sleepy_v2("),
        "pyproject.toml": ("sleepy:make_sleepy", "sleepy:make_sleepy_v2"),
    }
    open_pr(gate_repo, "factory-renamed", renamed)
    code, comment, log, out = run_gate(gate_repo)
    assert code == 1, log[-3000:]
    verdict = json.loads((out / "verdict.json").read_text())
    (sleepy,) = verdict["workloads"]
    assert sleepy["status"] == "missing"
    assert "has no attribute 'make_sleepy'" in sleepy["notes"][0]
    assert "was not measured at head" in comment and "missing at head" in comment
    assert not (out / "head.json").exists()  # a result document needs a measurement
    assert "head.json is not written" in log


TAMPER = '''
import os, time
PIDS = {pids!r}

def _tamper():
    """Detach a process that keeps rewriting the gate's outputs with a fake pass."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(PIDS, "a") as handle:
                handle.write(f"{{os.getpid()}}\\n")
            fake = '{{"schema": "perfgate.verdict", "overall": "pass"}}'
            out = os.path.join(os.getcwd(), "perfgate-out")
            for _ in range(4000):
                for name in ("verdict.json", "head.json", "comment.md", "compare-exit-code"):
                    try:
                        with open(os.path.join(out, name), "w") as handle:
                            handle.write("0\\n" if name == "compare-exit-code" else fake)
                    except OSError:
                        pass
                time.sleep(0.03)
            os._exit(0)
        os._exit(0)
    os.wait()

_tamper()
'''


def test_detached_code_cannot_rewrite_the_outputs(gate_repo: Path, tmp_path: Path) -> None:
    pids = tmp_path / "tamperers"
    hostile = "BROKEN = False\n" + TAMPER.format(pids=str(pids))
    open_pr(gate_repo, "tamper", {"model.py": [SLOWER_EDIT, ("BROKEN = False\n", hostile)]})
    code, comment, log, out = run_gate(gate_repo)
    assert code == 1, log[-3000:]
    assert comment.startswith("## perfgate: regression"), comment
    assert json.loads((out / "verdict.json").read_text())["overall"] == "regression"
    assert compare_code(out) == 1
    sums: dict[str, str] = dict(
        reversed(line.split("  "))  # type: ignore[misc]
        for line in (out / "SHA256SUMS").read_text().splitlines()
    )
    for name, digest in sums.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    started = [int(pid) for pid in pids.read_text().split()]
    assert started, "the hostile workload never ran"
    assert not [pid for pid in started if Path(f"/proc/{pid}").exists()], "a tamperer survived"


def test_a_committed_database_is_not_trusted(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No database URL in the environment (a fork's PR gets no secrets) and no snapshots: the
    PR commits ``.perfgate/gate.db`` (the config's database) holding baselines of its own slow
    code. The gate must not read it: with no trusted baseline it measures main against the head."""
    repo = new_repository(tmp_path_factory.mktemp("fake-db"))
    open_pr(repo, "slower-with-its-own-db", SLOWER)
    for _ in range(3):
        perfgate(repo, "run", "--device", "cpu", "--repeats", "3")
    perfgate(repo, "baseline", "refresh", "--branch", "main")
    git(repo, "add", "-f", ".perfgate/gate.db")
    git(repo, "commit", "--quiet", "-m", "flattering baselines")
    code, _, log, out = run_gate(repo)
    assert code == 1, log[-3000:]
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["method"] == "interleaved"
    assert "no stored or committed baseline yet" in " ".join(verdict["workloads"][0]["notes"])


SNOOP = """
import os
SEEN = {name: os.environ.get(name) for name in ("PERFGATE_DATABASE_URL", "GITHUB_TOKEN",
                                              "MY_SERVICE_TOKEN", "PGPASSWORD")}
"""
SNOOP_INFO = ("samples_per_step=batch,", "samples_per_step=batch, info={'seen': str(model.SEEN)},")


def test_workers_never_see_the_jobs_secrets(gate_repo: Path) -> None:
    """The job's database URL carries a password (PostgreSQL's trust authentication accepts
    any): the measured code must see none of the secrets, and no output may hold one."""
    with postgres_database() as url:
        database = url.replace("://postgres@", "://postgres:hunter2@")
        assert "hunter2" in database, url
        secrets_seen_by_nobody(gate_repo, database)


def secrets_seen_by_nobody(gate_repo: Path, database: str) -> None:
    secrets = {
        "PERFGATE_DATABASE_URL": database,
        "GITHUB_TOKEN": "ghs_s3cr3tt0k3n",
        "MY_SERVICE_TOKEN": "tok-0123456789",
        "PGPASSWORD": "pgs3cret",
    }
    snoop: Edits = {
        "model.py": ("BROKEN = False\n", "BROKEN = False\n" + SNOOP),
        "sleepy.py": SNOOP_INFO,
    }
    open_pr(gate_repo, "snoop", snoop)
    code, _, log, out = run_gate(gate_repo, **secrets)  # type: ignore[arg-type]
    assert code in (0, 1), log[-3000:]  # judged (its definition changed: by A/B), not crashed
    head = json.loads((out / "head.json").read_text())
    seen = head["workloads"][0]["setup_info"]["seen"]
    assert seen == str(dict.fromkeys(secrets)), seen  # every one of them was None
    everything = log + "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    for value in ("hunter2", *list(secrets.values())[1:]):
        assert value not in everything


HIDE = '''
_real_perf_counter = time.perf_counter
_hidden = 0.0


def _patched():
    return _real_perf_counter() - _hidden


time.perf_counter = _patched


def hidden_work(seconds):
    """Extra work whose time the patched clock leaves out."""
    global _hidden
    started = _real_perf_counter()
    time.sleep(seconds)
    _hidden += _real_perf_counter() - started
'''


SLEEP = "    time.sleep(TRANSFORM_S)\n"


def test_a_worker_clock_that_hides_time_is_untrustworthy(gate_repo: Path) -> None:
    hide: Edits = {
        "model.py": [
            ("BROKEN = False\n", "BROKEN = False\n" + HIDE),
            (
                "    time.sleep(TRANSFORM_S)\n",
                "    hidden_work(0.015)\n    time.sleep(TRANSFORM_S)\n",
            ),
        ]
    }
    open_pr(gate_repo, "hide-time", hide)
    code, comment, log, out = run_gate(gate_repo, PERFGATE_TEST_STEP_CLOCK="")
    assert code == 3, log[-3000:]
    assert "untrustworthy measurement" in log
    assert "untrustworthy measurement, twice in a row: the worker's clock disagrees" in comment
    assert comment.startswith("## perfgate: error")
    assert render_comment(out / "error.json") == comment


def test_the_comment_job_renders_the_verdict_document(gate_repo: Path) -> None:
    """What the comment job posts is rendered from verdict.json, not copied from comment.md:
    for an honest run the two are the same text; a rewritten comment.md changes nothing."""
    open_pr(gate_repo, "render", SLOWER)
    code, comment, _, out = run_gate(gate_repo, advise=True)
    assert code == 1
    rendered = render_comment(out / "verdict.json", out / "advice.json", None)
    link = re.search(r"Full report: (.*)\n", comment)
    assert link is not None
    expected = render_comment(out / "verdict.json", out / "advice.json", link.group(1))
    assert expected == comment
    assert rendered.startswith("## perfgate: regression")
    (out / "comment.md").write_text("## perfgate: pass\n")
    assert render_comment(out / "verdict.json", out / "advice.json", link.group(1)) == expected
    shutil.rmtree(out)
    assert os.path.exists(gate_repo)
