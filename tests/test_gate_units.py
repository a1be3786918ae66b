"""The parts of the untrusted-PR defences, each alone and fast: names, the trusted database,
membership, the worker's environment, the clock witness, the verdict document read back,
the comment renderer, module discovery without imports, the safe module command, strays."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import factories
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import synthetic_run
from test_compare_markdown import twelve_metrics

from perfgate.compare import comment
from perfgate.compare.baseline_source import from_snapshots
from perfgate.compare.gate import compare_runs
from perfgate.compare.membership import GatedWorkload, with_membership
from perfgate.compare.trusted import trusted_database_url
from perfgate.config import Config, _build
from perfgate.documents.result import RunResult
from perfgate.documents.snapshot import (
    SNAPSHOT,
    BaselineSnapshot,
    baseline_key,
    legacy_snapshot_path,
    snapshot_path,
)
from perfgate.documents.verdict import (
    ERROR,
    VERDICT,
    CompareVerdict,
    ErrorDocument,
    InconclusivePolicy,
    Overall,
    WorkloadVerdict,
    verdict_document,
)
from perfgate.errors import InfrastructureError, UsageError
from perfgate.files import write_json_atomic
from perfgate.names import check_key, check_name, confined, is_name
from perfgate.runner.environment import worker_environment
from perfgate.runner.pycommand import module_command
from perfgate.runner.strays import adopt_orphans, descendants, kill_strays
from perfgate.runner.witness import (
    ABSOLUTE_TOLERANCE_S,
    ClockWitness,
    WindowReporter,
    window_problem,
)
from perfgate.store.engine import masked_url
from perfgate.telemetry.fingerprint import fingerprint_key
from perfgate.workloads.user import locate_module

# --- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt", "mlp@smoke"[:3], "my-suite.v2", "A_1", "x" * 100])
def test_plain_names_are_names(name: str) -> None:
    assert check_name(name, "suite") == name


@pytest.mark.parametrize(
    "name", ["", "..", "../x", "/abs", "a/b", ".hidden", "-flag", "a b", "x" * 101, "[/x]", None]
)
def test_path_like_names_are_refused(name: object) -> None:
    with pytest.raises(UsageError, match="is not a valid name"):
        check_name(name, "suite", "perfgate.toml")


@given(st.text(max_size=20))
@settings(max_examples=200, derandomize=True, deadline=None)
def test_no_valid_name_leaves_its_folder(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    folder = tmp_path_factory.getbasetemp() / "names"
    if is_name(text):
        assert confined(folder, text).parent == folder
        assert "/" not in text and not text.startswith(".")


def test_snapshot_paths_stay_in_the_snapshot_folder(tmp_path: Path) -> None:
    key = "a" * 64
    readable = tmp_path / "pr" / "gpt@smoke-aaaaaaaaaaaa.json"
    assert snapshot_path(tmp_path, "pr", key, "gpt", "smoke") == readable
    assert snapshot_path(tmp_path, None, key, "gpt", None).name == "gpt-aaaaaaaaaaaa.json"
    assert legacy_snapshot_path(tmp_path, "pr", key) == tmp_path / "pr" / f"{key}.json"
    for suite in ("../outside", "/etc", "a/b"):
        with pytest.raises(UsageError):
            snapshot_path(tmp_path, suite, key, "gpt", "smoke")
        with pytest.raises(UsageError):
            legacy_snapshot_path(tmp_path, suite, key)
    for workload, preset in (("../x", "smoke"), ("gpt", "../../x"), ("/etc/passwd", None)):
        with pytest.raises(UsageError, match="not a valid name"):
            snapshot_path(tmp_path, "pr", key, workload, preset)
    with pytest.raises(UsageError, match="SHA-256"):
        snapshot_path(tmp_path, "pr", "../../" + "a" * 58, "gpt", "smoke")
    with pytest.raises(UsageError, match="leads outside"):
        confined(tmp_path, "..", "x")
    assert check_key(key) == key


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"suite": "../../elsewhere"}, "suite '../../elsewhere'"),
        ({"suites": {"/abs": ["mlp"]}}, "suite '/abs'"),
        ({"suites": {"pr": ["../mlp"]}}, "workload in suite pr '../mlp'"),
        ({"suites": {"pr": ["mlp@../x"]}}, "preset of mlp in suite pr '../x'"),
        ({"workloads": {"a/b": {"factory": "m:f"}}}, "workload 'a/b'"),
    ],
)
def test_configured_names_are_checked(
    tmp_path: Path, table: dict[str, object], needle: str
) -> None:
    with pytest.raises(UsageError, match="is not a valid name") as raised:
        _build(table, tmp_path, tmp_path / "perfgate.toml", {})
    assert needle in raised.value.problem


# --- the trusted database ---------------------------------------------------------------------


def test_the_trusted_database_is_the_jobs_or_the_bases_never_the_heads(tmp_path: Path) -> None:
    base = Config(root=tmp_path / "base", database_url="sqlite:///.perfgate/gate.db")
    head_root = tmp_path / "head"
    from_base = trusted_database_url(head_root, base, environ={})
    assert from_base == f"sqlite:///{(tmp_path / 'base' / '.perfgate' / 'gate.db').resolve()}"
    assert str(head_root) not in from_base
    secret = "postgresql://ci:pw@db.example/perf"
    assert trusted_database_url(head_root, base, {"PERFGATE_DATABASE_URL": secret}) == secret
    relative = trusted_database_url(head_root, base, {"PERFGATE_DATABASE_URL": "sqlite:///x.db"})
    assert relative == f"sqlite:///{(head_root / 'x.db').resolve()}"  # the job's own folder


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:hunter2@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db?password=hunter2&sslmode=require", "password=***&sslmode=require"),
        ("postgresql://u@h/db?sslpassword=hunter2", "sslpassword=***"),
        ("postgresql://u@h:abc/db?password=hunter2", "<unparseable database URL>"),
    ],
)
def test_every_password_form_is_masked(url: str, shown: str) -> None:
    masked = masked_url(url)
    assert shown in masked and "hunter2" not in masked


# --- membership -----------------------------------------------------------------------------

GATED = [GatedWorkload(name="mlp", preset="smoke", definition_hash="a" * 64)]


def _judged(head_level: float = 0.1) -> tuple[CompareVerdict, RunResult]:
    from perfgate.compare.baseline_source import from_result

    base, head = synthetic_run(0.1, 1), synthetic_run(head_level, 2)
    return compare_runs(head, from_result(base, "base"), require_baseline=False), head


def test_a_gated_workload_the_head_did_not_measure_fails_the_gate() -> None:
    verdict, head = _judged()
    head = replace(head, workloads=[])
    gated = with_membership(verdict, head, GATED, "main")
    (missing,) = gated.workloads
    assert missing.status == "missing" and gated.overall == "regression"
    assert "dropped or renamed" in missing.notes[0]
    assert gated.notes[0].startswith("the gate fails: mlp of main's suite")
    reason = with_membership(verdict, head, GATED, "main", {"mlp": "no attribute"})
    assert "cannot be measured at head: no attribute" in reason.workloads[0].notes[0]


def test_another_preset_or_a_changed_definition_is_never_a_plain_pass() -> None:
    verdict, head = _judged()
    assert verdict.overall == "pass"
    other_preset = [replace(GATED[0], preset="full")]
    assert with_membership(verdict, head, other_preset, "main").workloads[0].status == "missing"
    changed = [replace(GATED[0], definition_hash="b" * 64)]
    judged = with_membership(verdict, head, changed, "main")
    assert judged.workloads[0].status == "definition_changed"
    assert judged.overall == "inconclusive" and not judged.workloads[0].comparisons
    same = with_membership(verdict, head, GATED, "main")
    assert same.workloads == verdict.workloads and same.overall == "pass"


def test_workloads_the_base_does_not_gate_are_kept_but_cannot_excuse_a_missing_one() -> None:
    verdict, head = _judged()
    gated = [GatedWorkload(name="gpt", preset="smoke", definition_hash="c" * 64)]
    judged = with_membership(verdict, head, gated, "main")
    assert [w.name for w in judged.workloads] == ["gpt", "mlp"]
    assert judged.overall == "regression"


# --- the worker's environment ---------------------------------------------------------------


def test_workers_get_the_allow_list_and_never_a_secret() -> None:
    parent = {
        "PATH": "/usr/bin",
        "OMP_NUM_THREADS": "2",
        "CUDA_VISIBLE_DEVICES": "0",
        "PERFGATE_DATABASE_URL": "postgresql://u:pw@h/db",
        "GITHUB_TOKEN": "ghs_x",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "PGPASSWORD": "x",
        "HOME": "/root",
        "DATASET_ROOT": "/data",
        "MY_API_KEY": "x",
        "RANDOM_THING": "x",
    }
    seen = worker_environment(parent, ["DATASET_*", "MY_API_KEY"])
    assert seen == {
        "PATH": "/usr/bin",
        "OMP_NUM_THREADS": "2",
        "CUDA_VISIBLE_DEVICES": "0",
        "HOME": "/root",
        "DATASET_ROOT": "/data",
    }


# --- the clock witness ----------------------------------------------------------------------


@given(
    steps=st.lists(st.floats(0.0005, 2.0), min_size=1, max_size=50),
    delay=st.floats(0.0, ABSOLUTE_TOLERANCE_S * 0.99),
)
@settings(max_examples=300, derandomize=True, deadline=None)
def test_honest_steps_fit_the_window_despite_a_late_marker(
    steps: list[float], delay: float
) -> None:
    assert window_problem({0: sum(steps) + delay}, {0: steps}) is None


@given(
    steps=st.lists(st.floats(0.0005, 2.0), min_size=1, max_size=50),
    hidden=st.floats(0.06, 0.95),
)
@settings(max_examples=300, derandomize=True, deadline=None)
@pytest.mark.slow
def test_time_left_out_of_the_steps_is_found(steps: list[float], hidden: float) -> None:
    """``hidden`` of the window (6 % to 95 %) is missing from the reported steps: beyond the
    5 % share plus 50 ms once the window is long enough for it to show."""
    reported = sum(steps)
    window = reported / (1 - hidden)
    problem = window_problem({0: window}, {0: steps})
    if window - reported > 0.05 * window + ABSOLUTE_TOLERANCE_S:
        assert problem is not None and "disagrees with the parent's" in problem
    else:
        assert problem is None


def test_a_missing_or_inflated_window_is_a_problem() -> None:
    assert "never reached the parent" in str(window_problem({}, {0: [0.1]}))
    assert "rank 1's" in str(window_problem({0: 0.3, 1: 0.3}, {0: [0.3], 1: [0.1]}))
    assert "adds up" not in str(window_problem({0: 0.1}, {0: [0.5]}))
    assert window_problem({0: 0.1}, {0: [0.5]}) is not None


def test_the_witness_stamps_the_markers_with_the_parents_clock(tmp_path: Path) -> None:
    with ClockWitness(tmp_path, "repeat") as witness:
        reporter = WindowReporter(str(witness.path), rank=0)

        def worker() -> None:
            reporter.begin()
            time.sleep(0.2)
            reporter.end()

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        deadline = time.monotonic() + 10
        while 0 not in witness.windows() and time.monotonic() < deadline:
            time.sleep(0.01)
        window = witness.windows()[0]
    # The markers are stamped by the parent's clock when it reads them, so the window holds the
    # 0.2 s sleep give or take the two stamps' resolution (0.19996 s has been seen).
    assert 0.19 <= window < 5.0
    assert not witness.path.exists()
    WindowReporter(str(tmp_path / "gone"), 0).begin()  # no reader: silently nothing


# --- documents read back --------------------------------------------------------------------


def test_a_verdict_document_reads_back_as_the_same_verdict() -> None:
    verdict = replace(twelve_metrics(), inconclusive_policy="fail")
    document = json.loads(json.dumps(verdict_document(verdict, "fail")))
    assert VERDICT.read(document, "verdict") == verdict
    assert VERDICT.dump(VERDICT.read(document, "verdict")) == document


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"schema": "perfgate.advice"}, "is not a perfgate.verdict document"),
        ({"schema_version": 99}, "written by a newer perfgate"),
        ({"overall": "great"}, "at overall: 'great' is not one of"),
        ({"workloads": [{"name": "x", "status": "compared", "comparisons": [{}]}]}, "metric"),
        ({"notes": ["fine", 3]}, "at notes/1: 3 is not of type 'string'"),
    ],
)
def test_a_malformed_verdict_document_is_a_usage_error(
    change: dict[str, object], needle: str
) -> None:
    document = {**verdict_document(twelve_metrics(), "exit4"), **change}
    with pytest.raises(UsageError, match=needle):
        VERDICT.read(document, "verdict")


def test_an_error_document_reads_back_and_never_as_a_verdict() -> None:
    error = InfrastructureError("head workloads did not run", "fix them")
    document = ERROR.dump(ErrorDocument.of(error))
    back = ERROR.read(document, "error").error()
    assert isinstance(back, InfrastructureError) and back.one_line() == error.one_line()
    with pytest.raises(UsageError, match="at exit_code: 1 is not one of"):
        ERROR.read({**document, "exit_code": 1}, "error")


def test_the_comment_module_renders_verdicts_and_errors(tmp_path: Path) -> None:
    verdict_path, error_path = tmp_path / "verdict.json", tmp_path / "error.json"
    verdict_path.write_text(json.dumps(verdict_document(twelve_metrics(), "exit4")))
    error_path.write_text(
        json.dumps(ERROR.dump(ErrorDocument.of(UsageError("bad [link](x)", "fix"))))
    )
    out = tmp_path / "comment.md"
    assert comment.main([str(verdict_path), "--out", str(out)]) == 0
    assert out.read_text().startswith("## perfgate: regression")
    assert comment.main([str(error_path), "--out", str(out)]) == 0
    assert out.read_text().startswith("## perfgate: error") and "[link](x)" not in out.read_text()
    assert comment.main([str(tmp_path / "missing.json"), "--out", str(out)]) == 2


@pytest.mark.parametrize(
    ("overall", "policy", "conclusion"),
    [
        ("regression", "exit4", "failure"),
        ("pass", "exit4", "success"),
        ("inconclusive", "exit4", "neutral"),
        ("inconclusive", "pass", "success"),
        ("inconclusive", "fail", "failure"),
    ],
)
def test_the_check_run_says_what_the_verdict_says(
    tmp_path: Path, overall: str, policy: str, conclusion: str
) -> None:
    verdict = replace(factories.verdict(), overall=cast(Overall, overall))
    verdict_path = tmp_path / "verdict.json"
    verdict_path.write_text(json.dumps(verdict_document(verdict, cast(InconclusivePolicy, policy))))
    out, check = tmp_path / "comment.md", tmp_path / "check.json"
    argv = [str(verdict_path), "--out", str(out), "--check", str(check), "--head-sha", "f" * 40]
    assert comment.main(argv) == 0
    body = json.loads(check.read_text())
    assert body["name"] == "perfgate" and body["head_sha"] == "f" * 40
    assert body["status"] == "completed" and body["conclusion"] == conclusion
    assert body["output"]["title"].startswith(f"perfgate: {overall} (exit ")
    assert body["output"]["summary"] == out.read_text()


def test_the_check_run_of_an_error_fails_and_needs_the_commit(tmp_path: Path) -> None:
    error_path = tmp_path / "error.json"
    error_path.write_text(json.dumps(ERROR.dump(ErrorDocument.of(UsageError("bad", "fix")))))
    check = tmp_path / "check.json"
    out = str(tmp_path / "c.md")
    assert comment.main([str(error_path), "--out", out, "--check", str(check)]) == 2
    assert not check.exists()
    argv = [str(error_path), "--out", out, "--check", str(check), "--head-sha", "a" * 40]
    assert comment.main(argv) == 0
    body = json.loads(check.read_text())
    assert body["conclusion"] == "failure" and "could not judge" in body["output"]["title"]


# --- running nothing of the checkout under test -----------------------------------------------


def test_finding_a_factory_module_imports_nothing(tmp_path: Path) -> None:
    package = tmp_path / "teampkg"
    (package / "bench").mkdir(parents=True)
    marker = tmp_path / "imported"
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (package / "bench" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (package / "bench" / "work.py").write_text("def make(ctx): ...\n")
    found = locate_module("teampkg.bench.work:make", tmp_path)
    assert found == (package / "bench" / "work.py").resolve()
    assert not marker.exists() and "teampkg" not in sys.modules
    with pytest.raises(UsageError, match=r"cannot find workload module 'teampkg\.nope'"):
        locate_module("teampkg.nope:make", tmp_path)


def test_perfgates_modules_start_without_the_working_directory_on_their_path(
    tmp_path: Path,
) -> None:
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "__init__.py").write_text("raise SystemExit('shadowed by the checkout')\n")
    completed = subprocess.run(
        module_command("json.tool", "--help"), cwd=tmp_path, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    assert "shadowed" not in completed.stdout + completed.stderr


DETACH = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        os.close(1)
        os.close(2)
        time.sleep(120)
    os._exit(0)
os.wait()
"""


def test_a_detached_grandchild_is_adopted_and_killed() -> None:
    assert adopt_orphans()
    spared = descendants()
    child = subprocess.run(
        [sys.executable, "-c", DETACH], capture_output=True, text=True, timeout=60
    )
    daemon = int(child.stdout.split()[0])
    assert daemon in descendants()  # re-parented to this process, not to init
    assert daemon in kill_strays(spared)
    assert not Path(f"/proc/{daemon}").exists() or _zombie_gone(daemon)


def _zombie_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return True
    return state in ("Z", "X")


def test_os_environ_is_untouched_by_the_allow_list() -> None:
    before = dict(os.environ)
    worker_environment(os.environ, ["*"])
    assert dict(os.environ) == before


def test_workload_verdict_statuses_render_in_the_terminal_table() -> None:
    from perfgate.report.compare_table import verdict_table

    verdict = CompareVerdict(
        overall="regression",
        head_run_id="r",
        workloads=[WorkloadVerdict(name="[/x]", status="missing", notes=["gone"])],
        environment_differences=[],
    )
    assert verdict_table(verdict).row_count == 2


def _snapshot_for(head: RunResult, **changes: Any) -> tuple[str, BaselineSnapshot]:
    workload = head.workloads[0]
    key = baseline_key(
        head.suite,
        workload.definition_hash,
        workload.knobs,
        fingerprint_key(head.environment),
        "main",
    )
    fields: dict[str, Any] = {
        "key": key,
        "suite": head.suite,
        "workload": workload.name,
        "preset": workload.preset,
        "definition_hash": workload.definition_hash,
        "knobs": workload.knobs,
        "environment": head.environment,
    }
    return key, replace(factories.snapshot(), **{**fields, **changes})


def test_snapshots_are_read_by_their_readable_name_and_by_an_older_perfgates_name(
    tmp_path: Path,
) -> None:
    head = synthetic_run(0.1, 1)
    workload = head.workloads[0]
    key, readable = _snapshot_for(head)
    path = snapshot_path(tmp_path, head.suite, key, workload.name, workload.preset)
    assert path.name == f"{workload.name}@{workload.preset}-{key[:12]}.json"
    write_json_atomic(path, SNAPSHOT.dump(readable))
    found = from_snapshots(tmp_path, head, "main")
    assert found[workload.name].origin == str(path)
    path.unlink()
    legacy = legacy_snapshot_path(tmp_path, head.suite, key)
    write_json_atomic(legacy, SNAPSHOT.dump(replace(readable, preset=None)))
    assert from_snapshots(tmp_path, head, "main")[workload.name].origin == str(legacy)


def test_a_snapshot_whose_key_is_not_the_one_its_name_abbreviates_is_refused(
    tmp_path: Path,
) -> None:
    head = synthetic_run(0.1, 1)
    workload = head.workloads[0]
    key, _ = _snapshot_for(head)
    _, other = _snapshot_for(head, key=key[:12] + "f" * 52)
    path = snapshot_path(tmp_path, head.suite, key, workload.name, workload.preset)
    write_json_atomic(path, SNAPSHOT.dump(other))
    with pytest.raises(UsageError, match=f"holds key {key[:12]}f+, not {key}"):
        from_snapshots(tmp_path, head, "main")
