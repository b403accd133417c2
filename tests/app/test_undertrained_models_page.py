"""AppTest for the Under-trained tokens page on real models: the indicators of all-MiniLM-L6-v2 (no LM head),
verification on the tiny Llama trained in tests/conftest.py (`tiny_model`), and the whole pipeline on SmolLM2
(GGUF). Slow; the fast page tests on a synthetic checkpoint are in test_undertrained_page.py, the engine's in
tests/methods/undertrained/."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from app_support import verification_points
from download_support import record_downloads
from streamlit.testing.v1 import AppTest
from support import ROOT, need_minilm, need_smollm

from analysis.core import paths
from analysis.jobs.queue import set_immediate


@pytest.fixture(autouse=True)
def _jobs_at_once():
    """ "Verify" submits a job (a worker runs it in the app): here it runs at once, in this process."""
    set_immediate(paths.data_dir())
    yield
    set_immediate(paths.data_dir(), False)


def _page(monkeypatch, tmp_path):
    """The page in a new session (the run's one disk cache: SmolLM2's de-quantized weights are converted once)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.run()
    at.switch_page("pages/undertrained.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


@need_minilm
@pytest.mark.slow
def test_page_minilm_indicators_without_lm_head(monkeypatch, tmp_path):
    at = _page(monkeypatch, tmp_path)
    at.selectbox(key="ut-model-kind").select("all-MiniLM-L6-v2 (BERT, fetched)").run()
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["LM head"] == "no" and metrics["Main indicator"] == "cosine"
    assert any("no LM head" in w.value for w in at.warning)
    kinds = [c["data"][0]["type"] for c in _charts(at)]
    assert "histogram" in kinds and any(k.startswith("scatter") for k in kinds)
    assert any({"id", "token", "cosine", "class", "round_trip"} <= set(d.value.columns) for d in at.dataframe)


@pytest.mark.slow
def test_page_verification_on_tiny_model(tiny_model, monkeypatch, tmp_path):
    at = _page(monkeypatch, tmp_path)
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")  # a model folder on the server: a trusted local user only
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(tiny_model["folder"].parent))
    at.run()
    at.selectbox(key="ut-model-kind").select("Folder or file path on the server").run()
    at.text_input(key="ut-model-path").input(str(tiny_model["folder"])).run()
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert {m.label: m.value for m in at.metric}["Main indicator"] == "input_norm"
    at.number_input(key="ut-k").set_value(4).run()
    at.selectbox(key="ut-dev").select("cpu").run()
    at.button(key="ut-verify").click().run()
    assert not at.exception, [e.message for e in at.exception]
    ver = [c for c in _charts(at) if "Verification" in json.dumps(c.get("layout", {}).get("title", ""))]
    assert ver, "verification scatter missing"
    assert ver[0]["layout"]["yaxis"]["type"] == "log"
    assert any("4 verified so far" in c.value for c in at.caption)


@need_smollm
@pytest.mark.slow
def test_page_smollm2_pipeline(monkeypatch, tmp_path):
    """The whole pipeline in the app on the GGUF model (3 candidates verified to keep CPU time down): the run that
    "Verify" starts shows its verdicts at once, in the caption, the chart and the candidates table it offers for
    download, and the reference tokens are not verified by default. (A browser journey on a server once checked the
    same after its worker's job; the page's code is the same, the job panel's browser path is the Measure
    journey's, and the page's behaviour on a finished job is test_undertrained_page.py's.)"""
    downloads = record_downloads(monkeypatch)
    at = _page(monkeypatch, tmp_path)
    at.selectbox(key="ut-model-kind").select("SmolLM2-135M-Instruct (GGUF, fetched)").run()
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tied embeddings"] == "yes" and metrics["Main indicator"] == "cosine"
    at.number_input(key="ut-k").set_value(3).run()
    at.selectbox(key="ut-dev").select("cpu").run()
    at.button(key="ut-verify").click().run()
    assert not at.exception, [e.message for e in at.exception]
    done = next(c.value for c in at.caption if "3 verified so far" in c.value)
    low = int(re.match(r"3 verified so far; (\d) with max probability < 0\.01", done).group(1))
    assert len(verification_points(at)) == 3  # each verified candidate is a point, in the same run
    # the candidates table of the same run carries the verdicts the caption counts
    table = csv.DictReader(io.StringIO(downloads["ut-dl-cand-csv"].decode("utf-8")))
    rows = [r for r in table if r.get("verdict")]
    assert len(rows) == 3 and low == sum(float(r["max_prob"]) < 0.01 for r in rows), rows
    assert not any(r["reference"] == "True" for r in rows)  # reference tokens are not verified by default
