"""First views from the disk cache: a second session (or a restarted server) opening Prune or Token health on a
tokenizer already seen never recomputes the expensive part — the pruning order, the Self-Tokenization Test —
it reads it back from the disk store. Each test has its own store; the in-memory caches (engine memos and
Streamlit's) are emptied between the sessions, as a restart would."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared, static_tables

from analysis.bpe import stt
from analysis.core.cache import clear_memory
from analysis.methods import reuse
from analysis.methods.pruning import orders, stored
from analysis.tokenizer import vocab_table
from analysis.tokenizer.defaults import SAMPLE_TEXT
from analysis.views import vocab_views
from analysis.views.playground import pre_tokens
from ui import warmup
from ui.loaders import load_default


def _forget() -> None:
    """What a restarted server has lost: every in-memory result (engine memos, Streamlit caches)."""
    clear_memory()
    st.cache_resource.clear()
    st.cache_data.clear()


def _session(page: str, key: str) -> AppTest:
    """A new session with llama-2 in its library, opened on `page`."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["toklab_library"] = {"llama-2": load_shared("llama-2")}
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _recomputed(*args, **kwargs):
    raise AssertionError("recomputed although the disk cache holds the result")


@pytest.mark.slow
def test_prune_second_session_reads_the_order_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    _forget()
    first = _session("pages/prune.py", "prune-tok")
    summary = [m.value for m in first.markdown if "can prune up to" in m.value]
    assert summary, "the first session shows the order's summary"
    assert not first.dataframe, "the first view is static: no grid module to load"
    next_ids = list(static_tables(first)[0]["id"])
    assert list((tmp_path / "store" / "prune-order").glob("*.json")), "the order was stored"

    _forget()
    monkeypatch.setattr(orders, "compute_order", _recomputed)
    second = _session("pages/prune.py", "prune-tok")
    assert [m.value for m in second.markdown if "can prune up to" in m.value] == summary
    assert list(static_tables(second)[0]["id"]) == next_ids


def test_token_health_second_session_reads_the_stt_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    _forget()
    first = _session("pages/token_health.py", "th-tok")
    metrics = [(m.label, m.value) for m in first.metric]
    assert metrics and metrics[0][0] == "Unreachable tokens (STT)"
    table = first.dataframe[0].value
    assert list((tmp_path / "store" / "stt-report").glob("*.json")), "the report was stored"

    _forget()
    monkeypatch.setattr(stt, "_run_stt", _recomputed)
    monkeypatch.setattr(stt, "_categorise", _recomputed)
    second = _session("pages/token_health.py", "th-tok")
    assert [(m.label, m.value) for m in second.metric] == metrics
    assert second.dataframe[0].value[["id", "category", "pieces"]].equals(table[["id", "category", "pieces"]])


@pytest.mark.slow
def test_the_servers_background_warm_up_is_what_the_first_views_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`scripts/serve.py` computes the embedded default's first-view analyses in the background: the first session
    of Load & inspect, Token health, Token reuse and Prune then computes none of them (every memo lookup is a hit)."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    _forget()
    assert warmup.warm_in_background(load_default).join(300) is None
    memos = {"vocabulary table": vocab_table._table, "STT": stt._stt_report, "STT table": vocab_views._stt_table,
             "classes": reuse.classify_vocab, "shared symbols": reuse.all_shared_symbol_ids,
             "pruning order": stored._read_order}  # fmt: skip
    warmed = {k: m.cache_info() for k, m in memos.items()}
    assert all(info["size"] >= 1 for info in warmed.values()), warmed
    for page in ("pages/inspect.py", "pages/token_health.py", "pages/reuse.py", "pages/prune.py"):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.switch_page(page).run()
        assert not at.exception, [e.message for e in at.exception]
    after = {k: m.cache_info() for k, m in memos.items()}
    assert {k: v["misses"] for k, v in after.items()} == {k: v["misses"] for k, v in warmed.items()}
    assert after["vocabulary table"]["hits"] > warmed["vocabulary table"]["hits"]
    assert after["classes"]["hits"] > warmed["classes"]["hits"]
    assert after["shared symbols"]["hits"] > warmed["shared symbols"]["hits"]
    assert after["STT table"]["hits"] > warmed["STT table"]["hits"]
    assert after["pruning order"]["hits"] > warmed["pruning order"]["hits"]
    assert any("can prune up to" in m.value for m in at.markdown)  # Prune's first view shows that order


def _svgs(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("<svg")]


def test_inspect_and_token_health_draw_static_charts_first_and_plotly_on_request():
    """Their first views load no chart module (and Load & inspect no syntax highlighter): the charts are SVG (ui/svg.py) whose tooltips carry the counts
    the tables hold; the toggle swaps in the interactive Plotly charts."""
    tok = load_shared("llama-2")
    at = _session("pages/inspect.py", "inspect-tok")
    assert not at.get("plotly_chart") and len(_svgs(at)) == 1
    # nor the syntax highlighter (1.6 MB) for the normalized sample: plain monospace text
    assert not at.code and pre_tokens(tok, SAMPLE_TEXT)[0] in [t.value for t in at.text]
    by_script = vocab_table.vocab_table(tok)["script"].value_counts()
    tips = dict(re.findall(r"<title>([^<:]+): ([\d,]+)</title></rect>", _svgs(at)[0]))
    assert {k: int(v.replace(",", "")) for k, v in tips.items()} == by_script.to_dict()
    at.toggle(key="inspect-plotly").set_value(True).run()
    assert len(at.get("plotly_chart")) == 1 and not _svgs(at)

    at = _session("pages/token_health.py", "th-tok")
    assert not at.get("plotly_chart") and len(_svgs(at)) == 2
    shown = int(
        re.search(r"([\d,]+) of [\d,]+ ids", " ".join(c.value for c in at.caption)).group(1).replace(",", "")
    )
    for svg in _svgs(at):  # both charts count every id of the filtered view once
        counts = re.findall(r"<title>[^<]*? ([\d,]+)</title></rect>", svg)
        assert sum(int(c.replace(",", "")) for c in counts) == shown
    at.toggle(key="th-plotly").set_value(True).run()
    assert len(at.get("plotly_chart")) == 2 and not _svgs(at)


#: A page whose slow part is behind `start_now`, on a tokenizer of the vocabulary size in the query string.
SLOW_PART_APP = """
from types import SimpleNamespace

import streamlit as st

from ui.progress import start_now

size = int(st.query_params.get("size", "1"))
tok = SimpleNamespace(vocab_size=size, content_hash=f"h{size}")
if start_now(tok, "slow-go", "Compute it", "it takes a while"):
    st.markdown("computed")
"""


@pytest.mark.parametrize("size", [1_000, 150_000])
def test_a_large_vocabularys_slow_part_waits_for_its_button_and_is_remembered(size):
    """`ui.progress.start_now`: up to AUTO_START_VOCAB tokens the slow part runs in the first view; above it the
    page shows why it waits and a button, and once pressed the part runs on every later run for that tokenizer
    (Prune's pruning and first merge tree, Token health's replay on a 150k vocabulary use it)."""
    at = AppTest.from_string(SLOW_PART_APP, default_timeout=30)
    at.query_params["size"] = str(size)
    at.run()
    shown = [m.value for m in at.markdown]
    if size <= 100_000:
        assert "computed" in shown and not at.button
        return
    assert "computed" not in shown and [b.label for b in at.button] == ["Compute it"]
    assert any("150,000 tokens: it takes a while, so it starts on the button." == c.value for c in at.caption)
    at.button(key="slow-go").click().run()
    assert "computed" in [m.value for m in at.markdown]
    at.run()  # remembered for this tokenizer: no button again
    assert "computed" in [m.value for m in at.markdown] and not at.button
