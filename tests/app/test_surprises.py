"""Silent surprises and readability slips, each pinned by a test that failed before its fix."""

from __future__ import annotations

import json

import pytest
from app_support import open_page
from streamlit.testing.v1 import AppTest
from support import FLORES, ROOT, TOKENIZERS, load_shared

from analysis.cli import main
from analysis.measure import grid, summaries
from analysis.texts import flores as fl
from analysis.views.runtime import switched_off, switched_off_note
from ui.trees import ROW_LEAVES


def _inspect_gpt2() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/inspect.py").run()
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], "gpt2": load_shared("gpt2")}
    at.run()
    at.selectbox(key="inspect-pick").set_value("gpt2").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_parity_summary_leaves_the_reference_out():
    """English against itself is always 1.000: it made min = 1 for every tokenizer and biased mean and Gini."""
    rows = grid.compression_table(
        [load_shared("gpt2")], fl.open_flores(FLORES), ["eng_Latn", "est_Latn", "fin_Latn"]
    )
    s = summaries.summarize(rows, "parity", "eng_Latn")[0]
    assert s["languages"] == 2 and s["min"] > 1.0
    assert (
        summaries.summarize(rows, "bytes_per_token", "eng_Latn")[0]["languages"] == 3
    )  # other metrics keep English
    result = grid.CompressionResult("flores", rows, reference="eng_Latn")
    assert result.summary("parity")[0]["languages"] == 2  # what `compress` prints


def test_a_files_truncation_is_shown_where_the_app_switches_it_off():
    gpt2 = load_shared("gpt2")
    assert switched_off(gpt2) and "max_length 50" in switched_off(gpt2)[0]
    assert switched_off_note(load_shared("qwen3")) is None
    at = _inspect_gpt2()
    assert any("max_length 50" in i.value for i in at.info)
    at = open_page("pages/playground.py", t="example:gpt2")
    assert any("max_length 50" in c.value for c in at.caption)


def test_inspect_shows_no_absolute_server_path():
    at = _inspect_gpt2()
    shown = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert str(TOKENIZERS) not in shown and "example:gpt2" in shown


def test_one_match_is_one_match():
    at = open_page("pages/merge_trees.py", t="example:gpt2")
    at.text_input(key="mt-q").set_value("#1000").run()
    assert at.selectbox(key="mt-pick").label.endswith("(1 match)")


@pytest.mark.slow
def test_cli_extend_reports_held_out_compression_by_default(capsys):
    """As documented (`--flores LANG`, no `--heldout-flores`), `extend` printed no before/after compression."""
    args = ["extend", "--tokenizer", str(TOKENIZERS / "gpt2"), "--method", "continued", "--flores", "est_Latn",
            "--n", "50"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "est_Latn (FLORES held-out): bytes/token" in out
    assert main([*args, "--no-heldout"]) == 0
    assert "held-out" not in capsys.readouterr().out


def test_cli_stt_tree_keeps_csv_and_summary(capsys, tmp_path):
    """`stt --tree T --csv F` printed the tree and exited 0 without writing F or the summary."""
    csv = tmp_path / "stt.csv"
    gpt2 = str(TOKENIZERS / "gpt2")
    assert main(["stt", gpt2, "--tree", "Ġhello", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("' hello'") and "unreachable" in out and csv.is_file()
    assert main(["stt", gpt2, "--tree", "Ġhello"]) == 0
    assert "unreachable:" not in capsys.readouterr().out  # the tree alone, as before
    assert main(["stt", gpt2, "--tree", "Ġhello", "--csv", str(csv), "--json"]) == 2


def test_merge_tree_forest_of_a_long_text_wraps_into_readable_rows():
    """One forest of 40+ tokens overlapped every label; the rows hold at most ROW_LEAVES leaves each."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/merge_trees.py").run()
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], "gpt2": load_shared("gpt2")}
    at.run()
    at.selectbox(key="mt-tok").set_value("gpt2").run()
    at.radio(key="mt-mode").set_value("Every token of a text").run()
    text = "Tokenizers split naive words differently, and researchers compare them all day long. " * 3
    at.text_area(key="mt-text").input(text).run()
    assert not at.exception, [e.message for e in at.exception]
    charts = [c for c in at.get("plotly_chart") if "mt-forest" in c.proto.id]
    n_tokens = len(load_shared("gpt2").tokenizer.encode(text, add_special_tokens=False).ids)
    assert n_tokens > 2 * ROW_LEAVES and len(charts) >= 2
    roots = 0
    for c in charts:
        nodes = json.loads(c.proto.spec)["data"][1]
        xs = nodes["x"]
        assert max(xs) < 1.6 * ROW_LEAVES  # leaves at consecutive x from 0, small gaps between trees
        roots += sum(1 for y in nodes["y"] if y == 0)
    assert roots == n_tokens  # every token drawn once
