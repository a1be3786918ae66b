#!/usr/bin/env bash
# perfgate's pull-request gate: what .github/workflows/perf-pr.yml and the reusable action
# (action.yml) run on a GPU runner, and what tests/test_pr_gate.py runs on a CPU. It is
# `perfgate gate` with its flags taken from the environment (for CI systems that configure jobs
# by variables); `pip install perfgate` and `perfgate gate` alone do the same anywhere.
#
# `perfgate gate` runs in ONE process that the pull request's code never runs in: it reads
# the suite, workload definitions, thresholds, policy, budgets and baselines from the BASE ref,
# measures the head's code with them in worker processes (a scrubbed environment, their clocks
# checked against the parent's), profiles the advice, confirms every alert (and every workload
# whose code changed or that has no baseline) by an interleaved A/B of base against head, kills
# whatever the head's code left running, and only then writes its outputs, with their SHA-256.
#
# Inputs (environment, all optional):
#   PERFGATE_CMD          how to call perfgate (default: perfgate)
#   PERFGATE_SUITE        the base's suite to gate (default: the base's configured suite)
#   PERFGATE_CONFIG       perfgate.toml or pyproject.toml, read at the base ref
#   PERFGATE_BASE_REF     the trusted base ref (default: origin/$GITHUB_BASE_REF in a PR job)
#   PERFGATE_BASELINE_DIR snapshot folder, read at the base ref (default: baselines when the base
#                         ref has one, else the database named by PERFGATE_DATABASE_URL)
#   PERFGATE_DEVICE       cpu, cuda or auto (default: the base's configuration, else auto)
#   PERFGATE_ADVISE       1 to attach the advice (default: 1)
#   PERFGATE_OUT          output folder (default: perfgate-out)
#   PERFGATE_REPORT_URL   where the HTML report will be published, for the comment's link
#   PERFGATE_INCONCLUSIVE exit4, pass or fail (default: the base ref's inconclusive setting)
# Outputs in $PERFGATE_OUT: head.json, advice.json, verdict.json, comment.md,
# perfgate-report.html, compare-exit-code (the verdict's own code, 4 for inconclusive) and
# SHA256SUMS.
# Exit code: 0 pass, 1 regression (or a gated workload missing at head), 2 usage or config
# error, 3 infrastructure error (a workload crashed, a base ref failed to run). Inconclusive is
# NEUTRAL: exit 0, unless the base ref's config sets inconclusive = "fail" (then 1). With no
# stored or committed baseline (a project's first pull requests), the base ref is measured
# against the head as an interleaved A/B. A crash is never reported as a regression.
set -uo pipefail

read -r -a perfgate <<< "${PERFGATE_CMD:-perfgate}"
args=(--out "${PERFGATE_OUT:-perfgate-out}")
[ -n "${PERFGATE_BASE_REF:-}" ] && args+=(--base-ref "$PERFGATE_BASE_REF")
[ -n "${PERFGATE_SUITE:-}" ] && args+=(--suite "$PERFGATE_SUITE")
[ -n "${PERFGATE_CONFIG:-}" ] && args+=(--config "$PERFGATE_CONFIG")
[ -n "${PERFGATE_BASELINE_DIR:-}" ] && args+=(--baseline-dir "$PERFGATE_BASELINE_DIR")
[ -n "${PERFGATE_DEVICE:-}" ] && args+=(--device "$PERFGATE_DEVICE")
[ -n "${PERFGATE_REPORT_URL:-}" ] && args+=(--report-url "$PERFGATE_REPORT_URL")
[ -n "${PERFGATE_INCONCLUSIVE:-}" ] && args+=(--inconclusive "$PERFGATE_INCONCLUSIVE")
if [ "${PERFGATE_ADVISE:-1}" = 1 ]; then args+=(--advise); else args+=(--no-advise); fi

echo "::group::perfgate gate"
"${perfgate[@]}" gate "${args[@]}"
status=$?
echo "::endgroup::"
exit "$status"
