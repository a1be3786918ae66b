#!/usr/bin/env bash
# Propose the nightly's baselines/ snapshots as a pull request on a dedicated branch: a person
# reviews what moved; main is never rewritten by a job.
#   environment: GH_TOKEN (contents: write on that branch, pull-requests: write),
#   PERFGATE_BRANCH (main)
set -euo pipefail
base="${PERFGATE_BRANCH:-main}"
if git diff --quiet -- baselines && [ -z "$(git ls-files --others --exclude-standard baselines)" ]; then
  echo "propose-baselines: baselines/ unchanged; nothing to propose"
  exit 0
fi
branch="perfgate/baselines"
day="$(date -u +%F)"
git switch -C "$branch"
git add baselines
git -c user.name="perfgate" -c user.email="perfgate@users.noreply.github.com" \
  commit --quiet -m "perfgate: baselines from the nightly refresh of $day"
git push --force origin "$branch"
if ! gh pr view "$branch" >/dev/null 2>&1; then
  gh pr create --base "$base" --head "$branch" \
    --title "perfgate: nightly baselines" \
    --body "The nightly refresh moved baselines after confirmed change points (see the nightly run's log and \`perfgate baseline show\`). Review the snapshot changes before merging."
fi
echo "propose-baselines: $branch pushed for review"
