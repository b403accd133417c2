"""AppTest for the Prune page: it offers exactly the registry's orders (as the CLI's `--order` does, tested in
tests/methods/pruning/test_order_registry.py), computes the curves, shows the next tokens with their merge tree,
writes the pruned tokenizer to a server folder, and orders leaves by SmolLM2's under-trained indicator."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, SMOLLM, load_shared, need_smollm, run_page_job, static_tables

from analysis.core.workspace import default_store
from analysis.methods import pruning as P
from analysis.methods import undertrained as ut
from analysis.tokenizer.sources import load


def test_page_offers_exactly_the_registry():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["toklab_library"] = {"llama-2": load_shared("llama-2")}
    at.switch_page("pages/prune.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    box = at.selectbox(key="prune-order")
    assert list(box.options) == [P.ORDER_LABELS[o] for o in P.ORDERS]
    assert box.value == "leaf-frequency"


@pytest.mark.slow
def test_prune_page_curves_and_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "TOKLAB_SERVER_PATHS", "1"
    )  # writing a folder on the server: a trusted local user only
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["toklab_library"] = {"llama-2": load_shared("llama-2")}
    at.switch_page("pages/prune.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("can prune up to" in m.value for m in at.markdown)
    at.slider(key="prune-points").set_value(3)
    at.number_input(key=f"prune-maxn-{load_shared('llama-2').content_hash}").set_value(8000)
    at.button[0].click()  # the form's "Compute curves"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    charts = at.get("plotly_chart")
    assert len(charts) == 2
    spec = json.loads(charts[1].proto.spec)
    assert list(spec["data"][0]["y"]) == [0, 0, 0] or spec["data"][0]["y"].get("bdata")
    # next tokens with a merge tree, export to a folder
    assert len(at.dataframe) >= 1
    assert at.code and "merge #" in at.code[0].value
    at.text_input(key="prune-out").input(str(tmp_path / "out")).run()
    at.button(key="prune-write").click().run()
    assert not at.exception, [e.message for e in at.exception]

    assert load(tmp_path / "out").vocab_size == 32000 - 1000


@need_smollm
@pytest.mark.slow
def test_prune_page_under_trained_first_order() -> None:
    """The page's under-trained order: leaves with the lowest indicator of SmolLM2's embeddings go first."""

    tok = load_shared("smollm2-135m-instruct")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["toklab_library"] = {"smollm2": tok}
    at.switch_page("pages/prune.py")
    at.run()
    at.selectbox(key="prune-order").select("score").run()
    assert not at.exception, [e.message for e in at.exception]
    at.selectbox(key="prune-ut-kind").select("SmolLM2-135M-Instruct (GGUF, fetched)").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("can prune up to" in m.value for m in at.markdown)
    shown = static_tables(at)[0]
    # the same order from the library: lowest indicator first among leaves
    res = ut.analyze(str(SMOLLM), tok)
    order = P.compute_order(tok, "score", scores=res.main_values[: res.n_tokens].astype("float64"))
    n = int(at.number_input(key="prune-n").value)
    assert list(shown["id"]) == list(order.ids[n : n + 25])
    keys = [order.keys[i] for i in order.ids[:200]]
    assert keys[0] <= float(np.percentile(res.main_values[: res.n_tokens], 5))
    assert all(np.isfinite(keys))
    # the pruned tokenizer with the model following it, into the workspace as downloads (server paths off)
    at.selectbox(key="prune-ws-model-kind").select("SmolLM2-135M-Instruct (GGUF, fetched)").run()
    at.checkbox(key="prune-ws-gguf").check().run()
    at.button(key="prune-ws-build").click().run()
    job = run_page_job(at, "prune-ws")  # a worker's work, here in this process
    assert job.state == "done", job.error
    at.run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    ws = at.query_params["ws"][0] if isinstance(at.query_params["ws"], list) else at.query_params["ws"]
    kept = {
        i.name: default_store().file_path(ws, "artifact", i.name)
        for i in default_store().items(ws, "artifact")
        if not i.name.startswith("job-inputs/")  # the job's inputs (the edit's tokenizers and report)
    }
    [zipped] = [n for n in kept if n.endswith(".zip")]
    with zipfile.ZipFile(kept[zipped]) as zf:
        members = {m.split("/", 1)[1] for m in zf.namelist()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "prune_report.json"} <= members, members
    [gguf] = [n for n in kept if n.endswith(".gguf")]
    assert kept[gguf].read_bytes()[:4] == b"GGUF"
    labels = [e.proto.label for e in at.get("link_button")]
    assert (
        sum(
            x.startswith(("Download the model (Hugging Face folder, zip) · ", "Download the .gguf · "))
            for x in labels
        )
        == 2
    )
