"""Tables for the terminal whose text is shown exactly as it is.

Rich reads ``[...]`` in a plain string as markup: a workload, preset, file name or error
message holding ``[bold]`` would be restyled, and one holding ``[/x]`` crashes the renderer
(an unmatched closing tag). Every table perfgate prints is a :class:`PlainTable`, which takes
its title, caption and cells as literal text; a styled cell is a ``rich.text.Text`` made here
(``Text("regression", style="red")``), never markup.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

WIDE_COLUMNS = 120
"""Below this width a wide table is printed as blocks instead (:func:`indented`): squeezed
into a laptop's 80 columns, rich cuts its cells to "0.01…"."""


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

    def add_column(self, header: Any = "", *args: Any, **options: Any) -> None:
        """A column whose long cells wrap and fold rather than end in "…" (a number cut short
        is a wrong number)."""
        options.setdefault("overflow", "fold")
        super().add_column(header, *args, **options)

    def add_row(
        self,
        *renderables: RenderableType | None,
        style: Any = None,
        end_section: bool = False,
    ) -> None:
        cells = [Text(cell) if isinstance(cell, str) else cell for cell in renderables]
        super().add_row(*cells, style=style, end_section=end_section)


def indented(text: Text, indent: int, console: Console, width: int) -> Iterator[Text]:
    """``text`` wrapped to ``width`` with every line indented by ``indent`` spaces, and no
    trailing padding (which rich's ``Padding`` adds and a CI log keeps)."""
    for line in text.wrap(console, max(width - indent, 20)):
        line.rstrip()
        yield Text(" " * indent) + line
