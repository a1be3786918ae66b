"""Tables for the terminal whose text is shown exactly as it is.

Rich reads ``[...]`` in a plain string as markup: a workload, preset, file name or error
message holding ``[bold]`` would be restyled, and one holding ``[/x]`` crashes the renderer
(an unmatched closing tag). Every table perfgate prints is a :class:`PlainTable`, which takes
its title, caption and cells as literal text; a styled cell is a ``rich.text.Text`` made here
(``Text("regression", style="red")``), never markup.
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text


def literal(value: str | Text | None) -> Text | None:
    """``value`` as text that is never read as markup (a ``Text`` is kept as it is)."""
    return Text(value) if isinstance(value, str) else value


class PlainTable(Table):
    """A ``rich.table.Table`` whose title, caption and string cells are literal text."""

    def __init__(
        self,
        *headers: Any,
        title: str | Text | None = None,
        caption: str | Text | None = None,
        **options: Any,
    ) -> None:
        super().__init__(*headers, title=literal(title), caption=literal(caption), **options)

    def add_row(
        self,
        *renderables: RenderableType | None,
        style: Any = None,
        end_section: bool = False,
    ) -> None:
        cells = [Text(cell) if isinstance(cell, str) else cell for cell in renderables]
        super().add_row(*cells, style=style, end_section=end_section)
