"""AppTest for the Merge trees and Token health pages."""

from __future__ import annotations

import json
import shutil

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, TOKENIZERS, load_shared

from analysis import LoadedTokenizer, load
from analysis.tokenizer.defaults import DEFAULT_NAME, default_tokenizer


def _toy() -> LoadedTokenizer:
    """A tiny BPE with one unreachable token: "cab" needs ca+b, but a+b (rank 0) fires first."""
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "ca": 6, "cab": 7, " ": 8}
    merges = [["a", "b"], ["b", "c"], ["ab", "c"], ["c", "a"], ["ca", "b"]]
    doc = {
        "version": "1.0",
        "added_tokens": [
            {
                "id": 9,
                "content": "<s>",
                "special": True,
                "normalized": False,
                "lstrip": False,
                "rstrip": False,
                "single_word": False,
            }
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
    }
    return LoadedTokenizer.from_document(doc, name="toy")


def _app(page: str, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["toklab_library"] = {
        DEFAULT_NAME: default_tokenizer(),  # the start page shows the first entry
        "llama-2": load_shared("llama-2"),
        "toy": _toy(),
        "bert": load_shared("bert-base-uncased"),
    }
    at.run()
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _spec(at, key):
    charts = [c for c in at.get("plotly_chart") if c.proto.id and key in c.proto.id] or at.get("plotly_chart")
    return json.loads(charts[0].proto.spec)


# ------------------------------------------------------------------------------------------ merge trees
def test_merge_tree_of_a_searched_token():
    at = _app("pages/merge_trees.py")
    at.selectbox(key="mt-tok").set_value("llama-2").run()
    at.text_input(key="mt-q").input("▁believed").run()
    assert not at.exception
    assert at.selectbox(key="mt-pick").value == load_shared("llama-2").vocab["▁believed"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Reachable"] == "yes" and int(metrics["Depth"]) >= 2
    spec = _spec(at, "mt-tree")
    labels = spec["data"][1]["text"]
    assert any("#" in lab for lab in labels)  # merge ranks on the nodes
    assert at.query_params["token"] == "▁believed"
    # collapse beyond depth 1: fewer nodes, one marked collapsed
    at.slider(key="mt-depth").set_value(1).run()
    assert len(_spec(at, "mt-tree")["data"][1]["x"]) < len(labels)


@pytest.mark.slow
def test_merge_tree_from_query_param_and_unreachable_explanation():
    at = _app("pages/merge_trees.py", token="cab")
    at.selectbox(key="mt-tok").set_value("toy").run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Reachable"] == "NO"
    assert any("would make it" in i.value for i in at.info)  # an explanation, not an error
    assert not at.error
    assert len(at.dataframe) >= 1


def test_tokens_built_on_a_token():
    at = _app("pages/merge_trees.py")
    at.selectbox(key="mt-tok").set_value("toy").run()
    at.text_input(key="mt-q").input("ab").run()
    at.selectbox(key="mt-pick").set_value(3).run()  # "ab"
    assert not at.exception
    built = at.dataframe[-1].value
    assert list(built["token"]) == ["abc"]
    at.selectbox(key="mt-next").set_value(5).run()
    at.button(key="mt-open").click().run()
    assert at.selectbox(key="mt-pick").value == 5


def test_text_mode_draws_every_token():
    at = _app("pages/merge_trees.py")
    at.selectbox(key="mt-tok").set_value("llama-2").run()
    at.radio(key="mt-mode").set_value("Every token of a text").run()
    text = "Tokenization is unbelievably fun."
    at.text_area(key="mt-text").input(text).run()
    assert not at.exception and not at.warning
    table = at.dataframe[0].value
    tok = load_shared("llama-2")
    assert len(table) == len(tok.tokenizer.encode(text, add_special_tokens=False).tokens)
    assert _spec(at, "mt-forest")["data"][1]["x"]


def test_merge_trees_refuses_wordpiece_clearly():
    at = _app("pages/merge_trees.py")
    at.selectbox(key="mt-tok").set_value("bert").run()
    assert not at.exception
    assert any("BPE" in i.value for i in at.info)


# ------------------------------------------------------------------------------------------ token health
def test_token_health_counts_and_downloads():
    at = _app("pages/token_health.py")
    at.selectbox(key="th-tok").set_value("llama-2").run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Unreachable tokens (STT)"] == "0"
    assert metrics["Byte pieces"] == "256"
    assert metrics["Special"] == "3"
    # default filter: byte-fallback pieces (nothing unreachable); search narrows the table
    at.text_input(key="th-q").input("<0x4").run()
    table = at.dataframe[0].value
    assert len(table) == 16 and set(table["category"]) == {"byte_fallback"}
    assert (
        table["merge tree"].iloc[0] == "./merge_trees?t=example%3Allama-2&token=%3C0x40%3E"
    )  # a new session loads it
    labels = {b.label for b in at.get("download_button")}
    assert {"Download all ids (CSV)", "Download summary (JSON)"} <= labels
    at.button(key="th-integrity-run").click().run()  # every id back from its own text (llama-2: ▁ rules)
    got = {m.label: m.value for m in at.metric}["Ids that come back alone"]
    reasons = next(d.value for d in at.dataframe if list(d.value.columns) == ["reason", "ids"]).set_index(
        "reason"
    )
    assert (
        got.endswith("of 32,000")
        and reasons.loc["special", "ids"] == 3
        and reasons.loc["byte piece", "ids"] == 256
    )


def test_token_health_unreachable_table_and_explanation():
    at = _app("pages/token_health.py")
    at.selectbox(key="th-tok").set_value("toy").run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Unreachable tokens (STT)"] == "1"
    table = at.dataframe[0].value
    assert list(table["readable"]) == ["cab"] and table["pieces"].iloc[0] == "c | ab"
    # no source a link may name: no link (a new session would open "cab" in the default tokenizer); the button
    # below keeps the session (test_token_health_opens_the_merge_tree_through_the_url)
    assert "merge tree" not in table.columns
    assert any("would make it" in i.value for i in at.info) and not at.error  # an explanation, not an error
    assert "c | ab" not in " ".join(m.value for m in at.markdown)  # the pieces are drawn as tokens
    assert len(at.get("plotly_chart")) == 1  # the rank scatter; the two overview charts are SVG until asked
    assert sum(m.value.startswith('<svg class="tl-svg-chart"') for m in at.markdown) == 2
    at.toggle(key="th-plotly").set_value(True).run()
    assert len(at.get("plotly_chart")) == 3
    # filter by category: only reachable ones
    at.multiselect(key="th-cats").set_value(["reachable"]).run()
    assert set(at.dataframe[0].value["category"]) == {"reachable"}


def test_token_health_never_produced_on_flores():
    at = _app("pages/token_health.py")
    at.selectbox(key="th-tok").set_value("llama-2").run()
    assert "th-langs" not in [w.key for w in at.multiselect]  # the corpus fields are drawn when the box opens
    at.session_state["th-never-box"] = True
    at.run()
    at.multiselect(key="th-langs").set_value(["est_Latn"]).run()
    assert not at.exception
    m = [x for x in at.metric if x.label.startswith("Never produced")]
    assert m and 0 < int(m[0].value.replace(",", "")) < 32000
    # closed for two runs and opened again: the chosen languages are still chosen, the count is the same
    at.session_state["th-never-box"] = False
    at.run().run()
    assert "th-langs" not in [w.key for w in at.multiselect]
    at.session_state["th-never-box"] = True
    at.run()
    assert at.multiselect(key="th-langs").value == ["est_Latn"]
    assert [x.value for x in at.metric if x.label.startswith("Never produced")] == [m[0].value]


def test_token_health_refuses_wordpiece_clearly():
    at = _app("pages/token_health.py")
    at.selectbox(key="th-tok").set_value("bert").run()
    assert not at.exception
    assert any("BPE" in i.value for i in at.info)


def test_token_health_opens_the_merge_tree_through_the_url():
    at = _app("pages/token_health.py")
    at.selectbox(key="th-tok").set_value("toy").run()
    at.button(key="th-open-tree").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == "Merge trees"
    assert at.query_params["t"] == "toy"  # no shareable source: the library name (same session only)
    assert at.selectbox(key="mt-tok").value == "toy"
    assert at.text_input(key="mt-q").value == "#7"
    assert {m.label: m.value for m in at.metric}["Reachable"] == "NO"


def test_pickers_tag_and_explain_unsupported_tokenizers():
    at = _app("pages/reuse.py")
    options = at.selectbox(key="reuse-tok").options
    assert "bert · needs byte-level BPE" in options and "llama-2 · needs byte-level BPE" in options
    assert DEFAULT_NAME in options  # Qwen is byte-level BPE: not tagged
    at.selectbox(key="reuse-tok").set_value("llama-2").run()
    assert not at.exception and not at.error
    assert any("R-BPE token reuse needs a byte-level BPE model" in i.value for i in at.info)
    assert not at.get("plotly_chart")  # nothing else is drawn for an unsupported tokenizer


def test_dynamic_tokenization_tags_wordpiece_and_explains_it():
    """The Dynamic tokenization page uses the engine's own test (the tokens must concatenate to the text): BERT is
    tagged and, chosen, explained in an info box like every other page's unsupported tokenizer, not an error."""
    at = _app("pages/dynamic.py")
    options = at.selectbox(key="dyn-tok").options
    assert "bert · needs BPE or Unigram" in options and "llama-2" in options and DEFAULT_NAME in options
    at.selectbox(key="dyn-tok").set_value("bert").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Dynamic tokenization needs a BPE or Unigram model" in i.value for i in at.info)
    assert not at.metric  # nothing else is drawn for an unsupported tokenizer


def test_token_health_switch_sends_the_new_filters_to_the_browser():
    """After switching tokenizer the filters are the new defaults, and the browser is told so.

    A widget keeps its identity across tokenizers (same key): unless the server sends the value (`set_value`),
    the browser keeps drawing the previous chips while the table already uses the new filter (the bug a user
    saw: "Special / added" chips over Llama-3.1's 588 skip-only tokens). The browser test in
    tests/e2e/test_diagnose_e2e.py checks what is drawn.
    """
    at = _app("pages/token_health.py")
    at.selectbox(key="th-tok").set_value("llama-2").run()
    at.multiselect(key="th-cats").set_value(["special", "reachable"]).run()
    at.text_input(key="th-q").input("<").run()
    at.selectbox(key="th-tok").set_value("toy").run()
    assert not at.exception, [e.message for e in at.exception]
    cats = at.multiselect(key="th-cats")
    assert cats.value == ["unreachable_multi"] and cats.proto.set_value
    assert list(cats.proto.raw_values) == ["Unreachable (splits)"]
    assert at.text_input(key="th-q").value == "" and at.text_input(key="th-q").proto.set_value
    assert set(at.dataframe[0].value["category"]) == {"unreachable_multi"}


def test_merge_tree_is_readable_and_has_a_legend_for_every_marker():
    """Labels at a readable size, one legend entry per kind of node drawn, and the "built on it" count equal to
    the list below it (a token merged with itself counts once)."""
    at = _app("pages/merge_trees.py", token="cab")
    at.selectbox(key="mt-tok").set_value("toy").run()
    spec = _spec(at, "mt-tree")
    nodes = spec["data"][1]
    assert nodes["textfont"]["size"] >= 12
    assert all("<sub>" not in t for t in nodes["text"])  # no shrunken rank labels
    symbols = set(nodes["marker"]["symbol"])
    legend = {t["marker"]["symbol"]: t["name"] for t in spec["data"][2:]}
    assert symbols == set(legend) and {"x", "circle"} <= symbols  # the unreachable x has its legend entry
    assert spec["layout"]["showlegend"]
    at.text_input(key="mt-q").input("#1").run()  # "b": used by "ab" and "bc"
    metric = {m.label: m.value for m in at.metric}["Tokens built on it"]
    assert int(metric) == len(at.dataframe[-1].value) == 2


def test_token_health_links_no_server_path(tmp_path):
    """A tokenizer loaded from a folder that is no example: a link would carry its server path, which a link may not
    load (a new session would show the token in another tokenizer), so its rows have no link."""
    shutil.copy(TOKENIZERS / "gpt2" / "tokenizer.json", tmp_path / "tokenizer.json")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["toklab_library"] = {DEFAULT_NAME: default_tokenizer(), "copy": load(tmp_path)}
    at.run()
    at.switch_page("pages/token_health.py").run()
    at.selectbox(key="th-tok").set_value("copy").run()
    assert not at.exception, [e.message for e in at.exception]
    table = at.dataframe[0].value
    assert len(table) and "merge tree" not in table.columns
    at.selectbox(key="th-tok").set_value(
        DEFAULT_NAME
    ).run()  # the embedded default: a link a new session follows
    assert at.dataframe[0].value["merge tree"].str.startswith("./merge_trees?t=embedded%3A&token=").all()
