"""AppTest for the Compression page: pick tokenizers and languages, compute, charts, downloads, bad input."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest
from support import FLORES, ROOT, load_shared

from analysis.measure import metrics as mx


@pytest.fixture
def at(tmp_path, monkeypatch) -> AppTest:
    monkeypatch.setenv("TOKLAB_FLORES", str(FLORES))
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    app.run()
    app.switch_page("pages/compression.py").run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def _add_example(at: AppTest, name: str) -> None:
    """Put a shared tokenizer into the session library (as the sidebar's "Add an example" does)."""
    lib = at.session_state["toklab_library"]
    lib[name] = load_shared(name).with_source(name=name)
    at.session_state["toklab_library"] = lib
    at.run()
    assert not at.exception, [e.message for e in at.exception]


def _main_table(at: AppTest):
    """The sortable results table (dataframe keys are not exposed by AppTest: find it by its columns)."""
    for d in at.dataframe:
        if {"tokenizer", "lang", "bytes_per_token", "fertility", "parity"} <= set(d.value.columns):
            return d.value
    raise AssertionError("results table not found")


@pytest.mark.slow
def test_compute_two_tokenizers_on_languages(at):
    _add_example(at, "llama-3.1")
    at.multiselect(key="cmp-toks").set_value(["Qwen (embedded)", "llama-3.1"]).run()
    at.multiselect(key="cmp-langs").set_value(["eng_Latn", "est_Latn", "zho_Hans"]).run()
    at.button(key="cmp-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    table = _main_table(at)
    assert len(table) == 6
    llama = table.set_index(["tokenizer", "lang"]).loc["llama-3.1"]
    assert round(llama.loc["eng_Latn", "bytes_per_token"], 3) == 4.862
    assert round(llama.loc["est_Latn", "bytes_per_token"], 3) == 2.644
    assert llama.loc["zho_Hans", "spaceless"]
    # which encoder measured each tokenizer, and why (a fresh cache: tokenizers, while gigatoken is being verified)
    (encoders,) = [c.value for c in at.caption if c.value.startswith("Encoder")]
    assert "**llama-3.1** — tokenizers" in encoders
    assert "being verified" in encoders or "gigatoken cannot be imported" in encoders
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    heat = next(c for c in charts if c["data"][0]["type"] == "heatmap")  # few languages: values in the cells
    assert heat["layout"]["xaxis"]["side"] == "top"  # tokenizer names above the rows
    assert any(c["data"][0]["type"] == "box" for c in charts)  # the overview's distribution
    # the metric choice is the engine's metric registry, in its order, with its labels
    box = at.selectbox(key="cmp-metric")
    assert list(box.options) == list(mx.METRIC_LABELS.values()) and box.value == "bytes_per_token"
    # fertility on a spaceless script warns and points to the char-based alternative
    box.select("fertility").run()
    assert any("without spaces" in w.value for w in at.warning)
    # compare tab: Δrel and win rate
    labels = {m.label: m.value for m in at.metric}
    assert "Win rate of A" in labels and labels["Languages"] == "3"
    # drill down shows tokenized sentences
    assert [h for h in at.get("html") if "tl-spans" in h.proto.body], "drill-down should render token spans"
    # downloads (CSV, JSON, LaTeX of every language and per script)
    labels = [d.label for d in at.get("download_button")]
    assert labels == ["Download CSV", "Download JSON", "Download LaTeX, every language (longtable)",
                      "Download LaTeX, per script"]  # fmt: skip


def test_by_script_and_no_languages(at):
    at.radio(key="cmp-mode").set_value("By script").run()
    at.multiselect(key="cmp-scripts").set_value([]).run()
    assert not at.exception
    assert any("No languages selected" in w.value for w in at.warning)


def test_missing_and_empty_flores_give_clear_messages(at, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")  # a trusted local user may point at another FLORES copy
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(tmp_path))
    at.run()
    at.text_input(key="cmp-flores").input(str(tmp_path / "nope")).run()
    assert not at.exception
    assert any("does not exist" in e.value for e in at.error)
    empty = tmp_path / "empty"
    empty.mkdir()
    at.text_input(key="cmp-flores").input(str(empty)).run()
    assert not at.exception
    assert any("no FLORES" in e.value for e in at.error)
