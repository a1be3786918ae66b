"""The PR comment, rendered by the trusted job from the verdict document, not copied.

The gate job runs the pull request's code; the job that posts the comment holds a write token
and must run none of it. Posting the ``comment.md`` the gate job wrote would let a pull request
that controls that job post any text it likes, its own "pass" included. The comment job
therefore renders the comment itself, with the base branch's perfgate, from the typed fields of
``verdict.json`` (``perfgate.documents.verdict.VERDICT``) and, optionally, the
top advice of ``advice.json`` (``perfgate.documents.advice.ADVICE``): every string goes
through the renderer's escaping, and the
headline, exit code and layout are the renderer's, not the document's.

``python -m perfgate.compare.comment VERDICT --out COMMENT [--advice ADVICE] [--report-url
URL] [--check CHECK.json --head-sha SHA]`` needs neither torch nor the database libraries (a
comment job is a small machine). ``--check`` also writes the body of a GitHub Check run
(``POST /repos/{owner}/{repo}/check-runs``, ``scripts/check-run.sh`` posts it): conclusion
``success`` for a pass, ``failure`` for a regression or an error, ``neutral`` for an
inconclusive verdict under the default policy (``success``/``failure`` under ``pass``/``fail``),
the comment as its summary.
VERDICT may also be the gate's ``error.json`` (nothing could be judged): the comment then says
so, with the exit code that means usage or infrastructure, never regression.
Exit codes: 0 written, 2 a bad or missing input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from perfgate.documents.advice import ADVICE
from perfgate.documents.verdict import ERROR, VERDICT
from perfgate.errors import ExitCode, PerfgateError, UsageError
from perfgate.files import read_json, write_text_atomic
from perfgate.report.compare_markdown import (
    AdviceLine,
    error_markdown,
    top_advice,
    verdict_markdown,
)

VERDICT_FIX = "pass the verdict.json written by perfgate gate or perfgate compare --json"


def render_comment(
    verdict_path: Path, advice_path: Path | None = None, report_url: str | None = None
) -> str:
    """The comment's markdown, from the verdict document and (optionally) the advice; from
    the error document when the gate could judge nothing (``error.json``)."""
    data = read_json(verdict_path, what="verdict file", fix=VERDICT_FIX)
    origin = f"verdict file {verdict_path}"
    if isinstance(data, dict) and data.get("schema") == ERROR.name:
        return error_markdown(ERROR.read(data, origin).error())
    verdict = VERDICT.read(data, origin)
    return verdict_markdown(
        verdict,
        inconclusive_policy=verdict.inconclusive_policy,
        advice=advice_lines(advice_path),
        report_link=report_url,
    )


CHECK_NAME = "perfgate"
CHECK_SUMMARY_LIMIT = 65_535
"""GitHub's limit on a check run's ``output.summary``."""


def check_run(verdict_path: Path, markdown: str, head_sha: str) -> dict[str, object]:
    """The body of the GitHub Check run for this verdict (or error) document."""
    data = read_json(verdict_path, what="verdict file", fix=VERDICT_FIX)
    origin = f"verdict file {verdict_path}"
    if isinstance(data, dict) and data.get("schema") == ERROR.name:
        error = ERROR.read(data, origin)
        conclusion = "failure"
        title = f"perfgate could not judge this change (exit {error.exit_code})"
    else:
        verdict = VERDICT.read(data, origin)
        code = verdict.exit_code()
        conclusion = {
            ExitCode.OK: "success",
            ExitCode.REGRESSION: "failure",
            ExitCode.INCONCLUSIVE: "neutral",
        }[code]
        title = f"perfgate: {verdict.overall} (exit {int(code)})"
    return {
        "name": CHECK_NAME,
        "head_sha": head_sha,
        "status": "completed",
        "conclusion": conclusion,
        "output": {"title": title, "summary": markdown[:CHECK_SUMMARY_LIMIT]},
    }


def advice_lines(path: Path | None, label: str = "advice file") -> list[AdviceLine]:
    """The top advice of an advice document; a bad file is a usage error naming it (``label``:
    how the message names the file, e.g. the option that gave it)."""
    if path is None:
        return []
    return top_advice(ADVICE.load(path, label))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: write the comment; one line on stderr and exit 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="python -m perfgate.compare.comment", description=__doc__.splitlines()[0]
    )
    parser.add_argument("verdict", type=Path, help="verdict.json")
    parser.add_argument("--out", type=Path, required=True, help="where to write the markdown")
    parser.add_argument("--advice", type=Path, help="advice.json (its top advice is shown)")
    parser.add_argument("--report-url", help="where the HTML report is published")
    parser.add_argument("--check", type=Path, help="also write the GitHub Check run's body here")
    parser.add_argument("--head-sha", help="the commit the check run is for (with --check)")
    args = parser.parse_args(argv)
    try:
        if args.check is not None and not args.head_sha:
            raise UsageError("--check needs --head-sha", "pass the pull request's head commit")
        text = render_comment(args.verdict, args.advice, args.report_url)
        write_text_atomic(args.out, text, option="--out")
        if args.check is not None:
            body = check_run(args.verdict, text, args.head_sha)
            write_text_atomic(args.check, json.dumps(body, indent=2) + "\n", option="--check")
    except PerfgateError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return int(ExitCode.USAGE if exc.exit_code == ExitCode.USAGE else exc.exit_code)
    print(f"comment: {args.out}")
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
