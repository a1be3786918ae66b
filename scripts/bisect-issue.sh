#!/usr/bin/env bash
# Open, or add to, perfgate's ONE issue about slowdowns on the nightly branch (found by a hidden
# marker in its body), with tonight's bisect summary: a new issue the first night, a comment on
# the same open issue every night after, so a team watches one thread instead of a pile.
# Opt-in: scripts/nightly.sh calls it only with PERFGATE_BISECT_ISSUE=1.
#   usage: bisect-issue.sh SUMMARY.md
#   environment: GH_TOKEN (issues: write), GITHUB_REPOSITORY
# Uses the GitHub CLI (gh), which GitHub's hosted runners carry.
set -euo pipefail
file="$1"
: "${GITHUB_REPOSITORY:?}"
marker='<!-- perfgate-nightly-slowdown -->'
if [ ! -s "$file" ]; then
  echo "bisect-issue: $file is missing or empty; nothing to post" >&2
  exit 1
fi
title="$(head -n 1 "$file" | sed 's/^#* *//')"
body="$(printf '%s\n%s' "$marker" "$(cat "$file")")"
existing="$(gh api --paginate "repos/${GITHUB_REPOSITORY}/issues?state=open&per_page=100" \
  --jq ".[] | select(.pull_request == null) | select((.body // \"\") | startswith(\"${marker}\")) | .number" \
  | head -n 1)"
if [ -n "$existing" ]; then
  gh api --method POST "repos/${GITHUB_REPOSITORY}/issues/${existing}/comments" \
    -f body="$body" --silent
  echo "bisect-issue: commented on issue #${existing}"
else
  gh api --method POST "repos/${GITHUB_REPOSITORY}/issues" -f title="$title" -f body="$body" \
    --silent
  echo "bisect-issue: opened an issue: ${title}"
fi
