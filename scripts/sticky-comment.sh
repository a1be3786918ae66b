#!/usr/bin/env bash
# Create or update perfgate's ONE comment on a pull request (found by a hidden marker), so every
# push edits the same comment instead of piling new ones up.
#   usage: sticky-comment.sh COMMENT.md
#   environment: GH_TOKEN (pull-requests: write, nothing more), GITHUB_REPOSITORY, PR_NUMBER
# Uses the GitHub CLI (gh), which GitHub's hosted runners carry.
set -euo pipefail
file="$1"
: "${GITHUB_REPOSITORY:?}" "${PR_NUMBER:?}"
marker='<!-- perfgate-gate -->'
if [ ! -s "$file" ]; then
  echo "sticky-comment: $file is missing or empty; nothing to post" >&2
  exit 1
fi
body="$(printf '%s\n%s' "$marker" "$(cat "$file")")"
existing="$(gh api --paginate "repos/${GITHUB_REPOSITORY}/issues/${PR_NUMBER}/comments" \
  --jq ".[] | select(.body | startswith(\"${marker}\")) | .id" | head -n 1)"
if [ -n "$existing" ]; then
  gh api --method PATCH "repos/${GITHUB_REPOSITORY}/issues/comments/${existing}" \
    -f body="$body" --silent
  echo "sticky-comment: updated comment ${existing}"
else
  gh api --method POST "repos/${GITHUB_REPOSITORY}/issues/${PR_NUMBER}/comments" \
    -f body="$body" --silent
  echo "sticky-comment: created the comment"
fi
