"""ui/tables.py: the static tables of first views (no grid module to load) show what the grid showed."""

from __future__ import annotations

import math

import pandas as pd
from streamlit.testing.v1 import AppTest
from support import static_tables

from ui.tables import MAX_ROWS, cell_text, table_html


def test_cells_show_their_values_escaped_and_tokens_with_their_whitespace():
    df = pd.DataFrame(
        {"id": [7, 12_345], "token": ["<b>&amp;", "  two spaces "], "bytes/token": [3.14159265, 2.0]}
    )
    out = table_html(df)
    assert (
        "<th>token</th>" in out
        and "<th class=tl-num>bytes/token</th>" in out
        and "<b>" not in out.split("</style>")[1]
    )
    assert "<td>&lt;b&gt;&amp;amp;</td>" in out and "<td>  two spaces </td>" in out
    assert "<td class=tl-num>12345</td>" in out and "<td class=tl-num>3.14159</td>" in out
    assert "white-space:pre" in out  # tokens are shown as they are, spaces included
    assert [cell_text(v) for v in (None, math.nan, True, 5, 0.1 + 0.2, "x")] == [
        "",
        "",
        "True",
        "5",
        "0.3",
        "x",
    ]


def _page_with(df: pd.DataFrame, **kw) -> AppTest:
    def script(frame, kw):  # AppTest runs its source alone: no annotations to resolve
        from ui.tables import static_table  # noqa: PLC0415 - AppTest runs this body as a script of its own

        static_table(frame, **kw)

    at = AppTest.from_function(script, args=(df, kw))
    at.run()
    assert not at.exception
    return at


def test_a_table_reads_back_as_the_frame_it_drew_and_long_ones_say_what_they_left_out():
    df = pd.DataFrame({"id": range(3), "token": ["a", "ĠToken", "▁the"], "count": [1.5, 2.25, 3.0]})
    at = _page_with(df)
    assert not at.dataframe and not at.caption
    [back] = static_tables(at)
    assert back.equals(df)
    at = _page_with(pd.DataFrame({"id": range(MAX_ROWS + 10)}), height=300)
    [back] = static_tables(at)
    assert back["id"].tolist() == list(range(MAX_ROWS))
    assert 'style="max-height:300px"' in at.get("html")[0].proto.body
    assert at.caption[0].value == f"The first {MAX_ROWS:,} of {MAX_ROWS + 10:,} rows."
