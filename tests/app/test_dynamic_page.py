"""AppTest for the Dynamic tokenization page: the first view, the merges table, curve and metrics against
dynamic_tokenize, special tokens and sampled batches, the FVT embeddings of a model (the tiny Llama of
tests/conftest.py, `tiny_llama2`), and its JSON downloads, which are the CLI's `dynamic --json`. The engine is
tested in tests/methods/dynamic/."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout

import pytest
from download_support import record_downloads, without
from streamlit.testing.v1 import AppTest
from support import ROOT, flores_lines, load_shared, static_tables

from analysis.cli import main
from analysis.commands._equivalent import argv_of
from analysis.core.paths import public_document
from analysis.methods.dynamic import batch_fvt_embeddings, dynamic_batches, dynamic_tokenize


def test_dynamic_page_first_view_says_something():
    """The defaults (Estonian, word boundary, 10% target) open on a reachable target with k at the merges it takes."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/dynamic.py").run()
    assert not at.exception, [e.message for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Merges needed"] != "not reachable"
    assert at.slider(key="dyn-merges").value == int(metrics["Merges needed"].replace(",", "")) > 0
    assert float(metrics["Reduction"].rstrip("%")) >= 10.0
    assert any("drops fastest" in c.value for c in at.caption)  # the plot explained in one sentence


def test_dynamic_page():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/dynamic.py").run()
    assert not at.exception, [e.message for e in at.exception]
    at.session_state["toklab_library"] = {
        **at.session_state["toklab_library"],
        "llama-2": load_shared("llama-2"),
    }
    at.run()
    at.selectbox(key="dyn-tok").set_value("llama-2").run()
    at.selectbox(key="dyn-lang").set_value("est_Latn").run()
    at.slider(key="dyn-n").set_value(16).run()
    at.selectbox(key="dyn-boundary").set_value("pretokens").run()
    at.slider(key="dyn-merges").set_value(25).run()
    assert not at.exception and not at.error, [e.message for e in at.exception]
    texts = flores_lines("est_Latn", 16)
    res = dynamic_tokenize(load_shared("llama-2"), texts, 25, "pretokens")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tokens before"] == f"{sum(res.lengths_before):,}"
    assert metrics["Tokens after"] == f"{sum(res.lengths_after):,}"
    assert not at.dataframe, "the first view is static: no grid module to load"
    table = static_tables(at)[0]
    assert len(table) == 25 and list(table["merged (raw)"]) == [m.merged for m in res.merges]
    assert not at.get("plotly_chart")  # static first: the curve is SVG, one vertex per merge count here
    svg = next(m.value for m in at.markdown if m.value.startswith('<svg class="tl-svg-chart"'))
    ys = [float(p.split(",")[1]) for p in re.search(r'<polyline points="([^"]+)"', svg).group(1).split()]
    assert len(ys) > 25 and ys == sorted(ys)  # the average length only falls: its y coordinate only grows
    assert 'class="tl-vline"' in svg
    at.toggle(key="dyn-plotly").set_value(True).run()
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["y"][:26] == pytest.approx(res.merges2seqlen)
    assert len(ys) <= 601 <= len(spec["data"][0]["y"]) or len(ys) == len(
        spec["data"][0]["y"]
    )  # thinned to 600
    assert len([h for h in at.get("html") if "tl-spans" in h.proto.body]) >= 2 and at.get("download_button")
    full = dynamic_tokenize(load_shared("llama-2"), texts, 5000, "pretokens")
    at.number_input(key="dyn-target").set_value(15.0).run()
    need = {m.label: m.value for m in at.metric}["Merges needed"]
    assert need == f"{full.merges_for_reduction(15.0):,}"
    # special tokens counted: one <s> per sequence; merge counts sampled per batch
    at.checkbox(key="dyn-special").check().run()
    framed = dynamic_tokenize(load_shared("llama-2"), texts, 25, "pretokens", special_tokens=True)
    assert {m.label: m.value for m in at.metric}["Tokens before"] == f"{sum(framed.lengths_before):,}"
    batches = next(d for d in static_tables(at) if "m_max" in d.columns)
    runs = dynamic_batches(load_shared("llama-2"), texts, batch_size=8, seed=0, special_tokens=True)
    assert list(batches["merges"]) == [r.merges for r in runs]
    at.checkbox(key="dyn-special").uncheck().run()
    # user text, 'word' boundary
    at.radio(key="dyn-src").set_value("My text").run()
    user = ["Tallinnas ja Tallinnast", "Tallinnale, Tartus ja Tartust"]
    at.text_area(key="dyn-text").input("\n".join(user)).run()
    at.selectbox(key="dyn-boundary").set_value("word").run()
    assert not at.exception and not at.error
    k = at.slider(key="dyn-merges").value
    mine = dynamic_tokenize(load_shared("llama-2"), user, k, "word")
    assert 0 < len(mine.merges) and {m.label: m.value for m in at.metric}["Tokens after"] == str(
        sum(mine.lengths_after)
    )
    assert all("▁" not in m.merged[1:] for m in mine.merges)


def _cli_json(argv: list[str]) -> dict:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(argv) == 0
    return json.loads(buf.getvalue())


TIMINGS = {"seconds", "fvt_seconds", "read_seconds"}


@pytest.mark.slow
def test_page_json_downloads_are_the_cli_json(monkeypatch):
    """The page's "Download JSON" is `dynamic … --target T --full-curve --json` for the same batch, k and
    boundary, and its batches download is `dynamic … --batch-size B --sample-merges --json` (timings aside)."""
    got = record_downloads(monkeypatch)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/dynamic.py").run()
    at.session_state["toklab_library"] = {
        **at.session_state["toklab_library"],
        "llama-2": load_shared("llama-2"),
    }
    at.run()
    at.selectbox(key="dyn-tok").set_value("llama-2").run()
    at.selectbox(key="dyn-lang").set_value("est_Latn").run()
    at.slider(key="dyn-n").set_value(20).run()
    at.selectbox(key="dyn-boundary").set_value("word").run()
    at.number_input(key="dyn-target").set_value(12.0).run()
    at.slider(key="dyn-merges").set_value(30).run()
    at.number_input(key="dyn-batch-size").set_value(6).run()
    at.number_input(key="dyn-seed").set_value(2).run()
    assert not at.exception and not at.error, [e.message for e in at.exception]
    page = json.loads(got["dyn-download"])
    one, sampled = [
        c.value for c in at.code if c.language == "bash" and "python -m analysis dynamic" in c.value
    ]
    base = "python -m analysis dynamic $TOKLAB_ASSETS/tokenizers/llama-2 --flores est_Latn --n 20 --boundary word"
    assert one == f"{base} --merges 30 --target 12 --full-curve --json"
    assert sampled == f"{base} --batch-size 6 --sample-merges --seed 2 --json"
    cli = _cli_json(argv_of(one))  # the command the page shows
    assert page["merges_performed"] == 30 and page["target_reduction_pct"] == 12.0
    assert page["full_curve"]["exhausted"] and page["full_curve"]["merges_for_target"] is not None
    assert without(page, TIMINGS) == without(public_document(cli), TIMINGS)  # files by name
    batches = json.loads(got["dyn-batches-download"])
    assert len(batches["batches"]) == 4 and batches["sampled"] and batches["seed"] == 2
    assert batches == _cli_json(argv_of(sampled))


@pytest.mark.slow
def test_dynamic_page_model_embeddings(tiny_llama2, monkeypatch):
    path, _ = tiny_llama2
    got = record_downloads(monkeypatch)
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")  # a trusted local user may point at a model folder
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(path.parent))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/dynamic.py").run()
    at.session_state["toklab_library"] = {
        **at.session_state["toklab_library"],
        "llama-2": load_shared("llama-2"),
    }
    at.run()
    at.selectbox(key="dyn-tok").set_value("llama-2").run()
    at.selectbox(key="dyn-lang").set_value("eng_Latn").run()  # the batch this test measures below
    at.slider(key="dyn-n").set_value(32).run()
    at.selectbox(key="dyn-boundary").set_value("pretokens").run()
    at.slider(key="dyn-merges").set_value(10).run()
    # the model picker is drawn when the box opens
    assert "dyn-model-kind" not in [w.key for w in at.selectbox]
    at.session_state["dyn-emb-box"] = True
    at.run()
    at.selectbox(key="dyn-model-kind").set_value("Folder or file path on the server").run()
    at.text_input(key="dyn-model-path").input(str(path)).run()
    at.button(key="dyn-emb-run").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception]
    res = dynamic_tokenize(load_shared("llama-2"), flores_lines("eng_Latn", 32), 10, "pretokens")
    r = batch_fvt_embeddings(res, load_shared("llama-2"), path).report()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Rows computed (FVT)"] == f"{r['rows_computed']:,}"
    assert metrics["Tokens saved"] == f"{r['tokens_saved']:,}"
    table = next(d.value for d in at.dataframe if "pieces" in d.value.columns)
    assert len(table) == r["rows_computed"]
    assert any(b.label == "Download the rows (.safetensors)" for b in at.get("download_button"))
    # the page's JSON holds the embeddings' cost as the CLI reports it for the same batch and model
    page = json.loads(got["dyn-download"])
    (one,) = [c.value for c in at.code if c.language == "bash" and "--full-curve" in c.value]
    assert one.endswith(f"--merges 10 --target 10 --full-curve --model {path} --json")
    cli = _cli_json(argv_of(one))  # the command the page shows
    assert (
        page["embeddings"]["model"] == path.name and page["embeddings"]["rows_computed"] == r["rows_computed"]
    )
    assert without(page, TIMINGS) == without(public_document(cli), TIMINGS)  # files by name
    # the box closed again: the JSON still holds the embeddings of this batch
    at.session_state["dyn-emb-box"] = False
    at.run()
    assert "Rows computed (FVT)" not in {m.label for m in at.metric}
    assert json.loads(got["dyn-download"])["embeddings"]["rows_computed"] == r["rows_computed"]
    at.run()  # a second run with the box closed (Streamlit forgets undrawn widgets after one)
    # opened again: the model picked before is still picked, and the view of this batch is back
    at.session_state["dyn-emb-box"] = True
    at.run()
    assert at.selectbox(key="dyn-model-kind").value == "Folder or file path on the server"
    assert at.text_input(key="dyn-model-path").value == str(path)
    assert {m.label: m.value for m in at.metric}["Rows computed (FVT)"] == f"{r['rows_computed']:,}"
    # the view stays while the batch and k stay; another k forgets it
    at.slider(key="dyn-merges").set_value(11).run()
    assert "Rows computed (FVT)" not in {m.label for m in at.metric}
    assert at.text_input(key="dyn-model-path").value == str(path)
