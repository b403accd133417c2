"""Helpers shared by the AppTests in tests/app/ (importable from them as `app_support`: pytest puts this folder on
sys.path for its test files)."""

from __future__ import annotations

from html.parser import HTMLParser

import pandas as pd
from streamlit.testing.v1 import AppTest
from support import ROOT


def open_page(page: str, **query: str | list[str]) -> AppTest:
    """An AppTest of the app (inside the app.py frame) opened on `page` with the given query parameters; no
    exception in that first run."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


class _Cells(HTMLParser):
    """The header and body cells of one `ui/tables.py` table, as text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.head: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "tr" and self._cell is None:
            self.rows.append([])
        elif tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            (self.head if tag == "th" else self.rows[-1]).append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _typed(column: pd.Series) -> pd.Series:
    """A column of cell texts as the numbers they show where every cell is one (integers stay integers)."""
    for kind in (int, float):
        try:
            return column.map(kind)
        except ValueError:
            continue
    return column


def static_tables(at: AppTest) -> list[pd.DataFrame]:
    """The page's static tables (`ui/tables.py`) as DataFrames, in page order; numeric columns typed back."""
    out = []
    for h in at.get("html"):
        if 'class="tl-table"' not in h.proto.body:
            continue
        cells = _Cells()
        cells.feed(h.proto.body)
        rows = [r for r in cells.rows if r]
        frame = pd.DataFrame(rows, columns=cells.head)
        out.append(frame.apply(_typed) if rows else frame)
    return out


def tables(at: AppTest) -> list[pd.DataFrame]:
    """Every table of the page: the interactive grids (`st.dataframe`) first, then the static tables."""
    return [d.value for d in at.dataframe] + static_tables(at)
