"""The Jinja2 environment over perfgate's ``templates/`` folder.

The templates are package data in ``perfgate/templates/`` (the repository's top-level
``templates/`` links to it, for review next to ``rules/``), so a wheel carries them.

HTML templates are rendered with autoescaping on: every string a user, git or an error message
put into a document is escaped unless a template marks it safe, and only markup perfgate made
itself (inline SVG charts) is. Markdown templates are not HTML-escaped by Jinja; their values are
escaped for markdown before they reach the template
(:func:`perfgate.report.compare_markdown.escape_text`). Undefined names fail loudly
(``StrictUndefined``), so a template typo is a test failure, not an empty cell.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

from perfgate.errors import UsageError


def templates_folder() -> Path:
    """The built-in templates folder; a ``UsageError`` when this install does not have it."""
    folder = Path(__file__).resolve().parent.parent / "templates"
    if not folder.is_dir():
        raise UsageError(
            f"perfgate's report templates are missing ({folder} does not exist)",
            "install perfgate from a source checkout (pip install -e .) or a built wheel",
        )
    return folder


@cache
def environment(*, html: bool) -> jinja2.Environment:
    """The environment for HTML (autoescaped) or markdown (not) templates, built once."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_folder()),
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
