#!/usr/bin/env bash
# perfgate's pull-request gate, step by step: what .github/workflows/perf-pr.yml and the reusable
# action (action.yml) run on a GPU runner, and what tests/test_pr_gate.py runs on a CPU.
#
#   1. perfgate run      the suite, on the pull request's checkout (not stored: a PR's numbers
#                        never enter the baselines)
#   2. perfgate advise   profile it and rank the advice (optional; never part of the verdict)
#   3. perfgate compare  against the BASE ref's baselines and thresholds (read from the base
#                        commit, or the database; never from the PR's own tree), confirming any
#                        alert by an interleaved A/B re-run of base and head; writes the verdict,
#                        the PR comment, the job summary and the HTML report
#
# Inputs (environment, all optional):
#   PERFGATE_CMD          how to call perfgate (default: perfgate)
#   PERFGATE_SUITE        suite to run (default: the config's suite)
#   PERFGATE_CONFIG       perfgate.toml or pyproject.toml (default: found from the working dir)
#   PERFGATE_BASE_REF     the trusted base ref (default: origin/$GITHUB_BASE_REF in a PR job)
#   PERFGATE_BASELINE_DIR snapshot folder, read at the base ref (default: baselines when the base
#                         ref has one, else the database named by PERFGATE_DATABASE_URL)
#   PERFGATE_DEVICE       cpu, cuda or auto (default: auto)
#   PERFGATE_ADVISE       1 to attach the advice (default: 1)
#   PERFGATE_OUT          output folder (default: perfgate-out)
#   PERFGATE_REPORT_URL   where the HTML report will be published, for the comment's link
# Outputs in $PERFGATE_OUT: head.json, advice.json, verdict.json, comment.md, perfgate-report.html,
# and compare-exit-code (perfgate compare's own exit code).
# Exit code: 0 pass, 1 regression, 2 usage or config error, 3 infrastructure error (a workload
# crashed, a base ref failed to run). Inconclusive (compare's 4) is NEUTRAL: the script exits 0
# and says so, unless the base ref's config sets inconclusive = "fail" (compare then exits 1).
# With no stored or committed baseline (a project's first pull requests), compare --confirm
# measures the base ref against the head as an interleaved A/B. A crash is never reported as a
# regression.
set -uo pipefail

read -r -a perfgate <<< "${PERFGATE_CMD:-perfgate}"
out="${PERFGATE_OUT:-perfgate-out}"
device="${PERFGATE_DEVICE:-auto}"
base_ref="${PERFGATE_BASE_REF:-}"
if [ -z "$base_ref" ] && [ -n "${GITHUB_BASE_REF:-}" ]; then
  base_ref="origin/${GITHUB_BASE_REF}"
fi
if [ -z "$base_ref" ]; then
  echo "pr-gate: no base ref (set PERFGATE_BASE_REF, or run in a pull_request job)" >&2
  exit 2
fi
config=()
[ -n "${PERFGATE_CONFIG:-}" ] && config=(--config "$PERFGATE_CONFIG")
suite=()
[ -n "${PERFGATE_SUITE:-}" ] && suite=(--suite "$PERFGATE_SUITE")
baseline_dir="${PERFGATE_BASELINE_DIR:-}"
if [ -z "$baseline_dir" ] && git cat-file -e "${base_ref}:baselines" 2>/dev/null; then
  baseline_dir=baselines
fi
mkdir -p "$out"
rm -f "$out"/head.json "$out"/advice.json "$out"/verdict.json "$out"/comment.md \
  "$out"/perfgate-report.html "$out"/compare-exit-code

echo "::group::perfgate run"
"${perfgate[@]}" run "${suite[@]}" "${config[@]}" --device "$device" --trigger pr --no-store \
  --out "$out/head.json"
run_status=$?
echo "::endgroup::"
if [ ! -f "$out/head.json" ]; then
  # Nothing was measured, so there is nothing to judge: say so where the verdict would be.
  printf '## perfgate: error\n\nThe suite could not be run (perfgate run exited %s); see the job log.\n' \
    "$run_status" > "$out/comment.md"
  [ -n "${GITHUB_STEP_SUMMARY:-}" ] && cat "$out/comment.md" >> "$GITHUB_STEP_SUMMARY"
  exit "$([ "$run_status" -eq 2 ] && echo 2 || echo 3)"
fi

advice=()
if [ "${PERFGATE_ADVISE:-1}" = 1 ] && [ "$run_status" -eq 0 ]; then
  echo "::group::perfgate advise"
  if "${perfgate[@]}" advise "${suite[@]}" "${config[@]}" --device "$device" \
      --json "$out/advice.json"; then
    advice=(--advice "$out/advice.json")
  else
    echo "pr-gate: advise failed; the verdict does not depend on it" >&2
  fi
  echo "::endgroup::"
fi

baselines=()
[ -n "$baseline_dir" ] && baselines=(--baseline-dir "$baseline_dir")
report_url=()
[ -n "${PERFGATE_REPORT_URL:-}" ] && report_url=(--report-url "$PERFGATE_REPORT_URL")
echo "::group::perfgate compare"
"${perfgate[@]}" compare "$out/head.json" "${config[@]}" "${baselines[@]}" \
  --base-ref "$base_ref" --confirm --device "$device" \
  --json "$out/verdict.json" --markdown "$out/comment.md" --html "$out/perfgate-report.html" \
  "${advice[@]}" "${report_url[@]}"
status=$?
echo "::endgroup::"
echo "$status" > "$out/compare-exit-code"
if [ "$status" -eq 4 ]; then
  # Not enough evidence either way: never a red check on its own (the comment says what would
  # decide); a project that wants it red sets inconclusive = "fail" on its base branch.
  echo "::notice::perfgate: inconclusive (neutral): see the job summary for what would decide"
  exit 0
fi
exit "$status"
