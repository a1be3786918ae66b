#!/usr/bin/env bash
# perfgate's nightly job on main, step by step (.github/workflows/nightly.yml runs it after the
# shards of the full suite; tests/test_nightly.py runs it on a CPU):
#
#   1. perfgate merge            the shard documents into one run
#   2. perfgate ingest           store it (the database URL comes from PERFGATE_DATABASE_URL)
#   3. baseline refresh          move each baseline only after a confirmed change point; the
#                                refresh document lists the change points first seen tonight
#   4. the canary                the gate must catch a planted slowdown: an interleaved A/B of
#                                HEAD against itself with the head slowed by PERFGATE_CANARY;
#                                anything but "regression" fails the job loudly
#   5. bisect-steps              every new slowdown's commit range bisected; the culprits go
#                                to the job summary, and with PERFGATE_BISECT_ISSUE=1 to one
#                                GitHub issue (scripts/bisect-issue.sh)
#   6. baseline export           baselines/ snapshots, for scripts/propose-baselines.sh
#
#   usage: nightly.sh SHARD.json...
#   environment: PERFGATE_CMD (default perfgate), PERFGATE_BRANCH (main), PERFGATE_OUT
#   (perfgate-nightly), PERFGATE_CANARY (10%), PERFGATE_CANARY_SUITE (the config's suite),
#   PERFGATE_DEVICE (auto), PERFGATE_CONFIG, PERFGATE_BISECT_MAX (3 ranges a night),
#   PERFGATE_BISECT_ISSUE (unset: no issue)
set -euo pipefail
read -r -a perfgate <<< "${PERFGATE_CMD:-perfgate}"
branch="${PERFGATE_BRANCH:-main}"
out="${PERFGATE_OUT:-perfgate-nightly}"
canary="${PERFGATE_CANARY:-10%}"
config=()
[ -n "${PERFGATE_CONFIG:-}" ] && config=(--config "$PERFGATE_CONFIG")
canary_suite=()
[ -n "${PERFGATE_CANARY_SUITE:-}" ] && canary_suite=(--suite "$PERFGATE_CANARY_SUITE")
[ "$#" -gt 0 ] || { echo "nightly: no shard documents given" >&2; exit 2; }
mkdir -p "$out"

"${perfgate[@]}" merge "$@" --out "$out/nightly.json"
"${perfgate[@]}" ingest "$out/nightly.json" "${config[@]}"
"${perfgate[@]}" baseline refresh --branch "$branch" --json "$out/refresh.json" "${config[@]}"

set +e
"${perfgate[@]}" compare --ab HEAD HEAD --inject-slowdown "$canary" "${canary_suite[@]}" \
  "${config[@]}" --device "${PERFGATE_DEVICE:-auto}" --json "$out/canary.json"
caught=$?
set -e
if [ "$caught" -ne 1 ]; then
  echo "::error::the canary (head slowed by $canary) was NOT caught: perfgate compare exited" \
    "$caught, not 1. The gate cannot be trusted until this is understood." >&2
  exit 1
fi
echo "nightly: the canary ($canary slower) was caught"

"${perfgate[@]}" bisect-steps "$out/refresh.json" --out-dir "$out/bisect" \
  --summary "$out/bisect.md" --max-steps "${PERFGATE_BISECT_MAX:-3}" \
  --device "${PERFGATE_DEVICE:-auto}" "${config[@]}"
if [ "${PERFGATE_BISECT_ISSUE:-}" = 1 ] && grep -q '^## perfgate nightly: training got slower' \
  "$out/bisect.md"; then
  bash "$(dirname "$0")/bisect-issue.sh" "$out/bisect.md"
fi

# --allow-empty: the first nights have too few runs for a baseline; that is not a failure here.
"${perfgate[@]}" baseline export --branch "$branch" --allow-empty "${config[@]}"
