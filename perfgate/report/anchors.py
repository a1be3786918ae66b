"""Fragment ids of the HTML report, shared with the PR comment that links into it."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def anchor(*parts: str) -> str:
    """An id from names (``workload-gpt``, ``advice-gpt-manual-attention``): each part's runs of
    characters outside ``[A-Za-z0-9_-]`` become ``_``, parts are joined by ``-``."""
    return "-".join(_UNSAFE.sub("_", part) for part in parts)
