"""A first-view table: drawn with the page as static HTML. Streamlit's interactive grid (`st.dataframe`: sort by a
column, search, resize, CSV) draws nothing until its front-end modules have arrived: the grid and Apache Arrow,
1.2 MB of JavaScript that a new browser on two cores loads and compiles in 0.4–0.6 s, so the small read-only tables
of a first view (flags, pre-tokens, merges, the next tokens to prune, a comparison) are plain HTML tables here, and
the large tables people sort and search (the vocabulary, the STT table) stay grids."""

from __future__ import annotations

import html
import math
from numbers import Integral, Real
from typing import Any

import pandas as pd
import streamlit as st

#: The rows a static table shows at most; a longer frame shows its first rows and says how many it left out.
MAX_ROWS = 500

#: Streamlit's grid, approximately, in either theme (greys with alpha, the text colour inherited): its font size,
#: thin borders, a header row that stays at the top while the table scrolls inside its box (blurred under it, so
#: it needs no opaque colour of its own). Cells keep their whitespace (tokens are shown as they are).
CSS = """<style>
.tl-table-box{overflow:auto;border:1px solid rgba(128,128,128,.25);border-radius:.5rem;margin-bottom:.5rem}
.tl-table{border-collapse:collapse;width:100%;font-size:.875rem;line-height:1.4}
.tl-table th{position:sticky;top:0;background:rgba(128,128,128,.1);backdrop-filter:blur(8px);font-weight:400;
text-align:left;color:#808495}
.tl-table th,.tl-table td{padding:.25rem .5rem;border-bottom:1px solid rgba(128,128,128,.2);white-space:pre}
.tl-table .tl-num{text-align:right;font-variant-numeric:tabular-nums}
</style>"""


def cell_text(value: Any) -> str:
    """How a cell shows `value`: integers and text as they are, floats with up to 6 significant digits, missing
    values as an empty cell (as the grid shows them)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        return format(float(value), ".6g")
    return str(value)


def table_html(df: pd.DataFrame, *, height: int | None = None, max_rows: int = MAX_ROWS) -> str:
    """The HTML of `df` as a static table (no index; numbers right-aligned), in a box of at most `height` pixels that
    scrolls; at most `max_rows` rows."""
    numeric = [pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in df.dtypes]
    head = "".join(
        f"<th{' class=tl-num' if num else ''}>{html.escape(str(c))}</th>"
        for c, num in zip(df.columns, numeric)
    )
    rows = []
    for values in df.head(max_rows).itertuples(index=False, name=None):
        cells = "".join(
            f"<td{' class=tl-num' if num else ''}>{html.escape(cell_text(v))}</td>"
            for v, num in zip(values, numeric)
        )
        rows.append(f"<tr>{cells}</tr>")
    style = f' style="max-height:{int(height)}px"' if height else ""
    return (
        f'{CSS}<div class="tl-table-box"{style}><table class="tl-table">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def static_table(
    df: pd.DataFrame, *, height: int | None = None, max_rows: int = MAX_ROWS, container: Any = st
) -> None:
    """Draw `df` in `container` as a static table (:func:`table_html`); a caption says how many rows a longer frame
    left out."""
    container.html(table_html(df, height=height, max_rows=max_rows))
    if len(df) > max_rows:
        container.caption(f"The first {max_rows:,} of {len(df):,} rows.")
