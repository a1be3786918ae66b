#!/usr/bin/env bash
# Post perfgate's GitHub Check run (a pass is success, a regression or an error failure, an
# inconclusive verdict neutral), from the body `python -m perfgate.compare.comment --check`
# rendered out of the verdict document.
#   usage: check-run.sh CHECK.json
#   environment: GH_TOKEN (checks: write, nothing more), GITHUB_REPOSITORY
# Uses the GitHub CLI (gh), which GitHub's hosted runners carry.
set -euo pipefail
file="$1"
: "${GITHUB_REPOSITORY:?}"
if [ ! -s "$file" ]; then
  echo "check-run: $file is missing or empty; nothing to post" >&2
  exit 1
fi
gh api --method POST "repos/${GITHUB_REPOSITORY}/check-runs" --input "$file" --silent
echo "check-run: posted $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["conclusion"])' "$file")"
