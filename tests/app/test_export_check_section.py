"""AppTest of the Export check section (ui/export_check.py) on Load & inspect: behind its button a job (run here
by the test process, as a worker would) runs the export check on the selected tokenizer (a vocabulary-only GGUF in llama.cpp), shows the typed report, and its JSON
download is the document `python -m analysis export-check --json` prints for the same export; with server paths off
it checks the model files kept in the workspace (a zipped model folder, a .gguf)."""

from __future__ import annotations

import io
import json
import os
import sys
import time
import zipfile

import pytest
import torch
import transformers
from app_support import open_page
from download_support import record_downloads
from streamlit.testing.v1 import AppTest
from support import load_shared, run_page_job

from analysis.cli import main
from analysis.core import paths
from analysis.core.workspace import default_store
from analysis.jobs.queue import default_jobs, run_claimed
from analysis.model.config_files import write_accepted_forms
from analysis.model.gguf_model import export_gguf
from analysis.model.llamacpp import llama_cpp_available
from analysis.tokenizer.export import folder_files, write_files, zip_bytes, zip_folder


@pytest.mark.slow
def test_inspect_export_check_is_the_cli_json(monkeypatch, tmp_path, capsys):
    seen = record_downloads(monkeypatch)
    at = open_page("pages/inspect.py")
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], "gpt2": load_shared("gpt2")}
    at.run()
    at.selectbox(key="inspect-pick").set_value("gpt2").run()
    assert not at.exception
    assert at.button(key="inspect-check-run").label == "Run the export check"
    assert "inspect-check-dl" not in seen  # nothing is computed before the button
    at.multiselect(key="inspect-check-langs").set_value(["eng_Latn", "est_Latn"]).run()
    at.number_input(key="inspect-check-lines").set_value(5).run()
    at.button(key="inspect-check-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert "inspect-check-dl" not in seen  # submitted: a worker runs it (here, this process)
    assert run_page_job(at, "inspect-check-job").state == "done"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    page_doc = json.loads(seen["inspect-check-dl"])
    assert page_doc["kind"] == "folder" and page_doc["roundtrip"] is None
    assert {c["name"] for c in page_doc["checks"]} >= {"special_ids", "chat_template", "legacy_fields"}
    if llama_cpp_available():
        assert page_doc["ok"] and page_doc["parity"]["totals"]["flores"]["share"] == 1.0
        assert [e["lang"] for e in page_doc["parity"]["languages"] if e["kind"] == "flores"] == [
            "eng_Latn",
            "est_Latn",
        ]
    shown = [m.value for m in at.success] + [m.value for m in at.error]
    assert any(("ok" in v) for v in shown), shown
    # the CLI on the same export folder prints the same document
    with zipfile.ZipFile(io.BytesIO(zip_bytes(load_shared("gpt2"), None, folder="export"))) as zf:
        zf.extractall(tmp_path)
    rc = main(
        [
            "export-check",
            str(tmp_path / "export"),
            "--langs",
            "eng_Latn,est_Latn",
            "--max-lines",
            "5",
            "--json",
        ]
    )
    assert rc == 0
    assert json.loads(capsys.readouterr().out) == page_doc


@pytest.mark.slow
def test_export_check_says_llama_cpp_is_still_being_built(monkeypatch, tmp_path):
    """On a first start llama.cpp builds in the background (scripts/start.sh): until it is there, the parity part
    says so (since when, its log) and the rest of the check is shown."""
    (tmp_path / ".toklab-requirements-llama.txt.building").write_text(
        f"{os.getpid()}\n{time.time()}\n{tmp_path}/x.log\n"
    )
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # not importable yet
    at = open_page("pages/inspect.py")
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], "gpt2": load_shared("gpt2")}
    at.run()
    at.selectbox(key="inspect-pick").set_value("gpt2").run()
    at.multiselect(key="inspect-check-langs").set_value(["eng_Latn"]).run()
    at.number_input(key="inspect-check-lines").set_value(1).run()
    at.button(key="inspect-check-run").click().run()
    assert run_page_job(at, "inspect-check-job").state == "done"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any(
        "llama.cpp is still being built (started " in w.value and "x.log" in w.value for w in at.warning
    )


def _workspace_section() -> None:
    import streamlit as st  # noqa: PLC0415 (AppTest runs this function's body as a script)

    from ui.export_check import export_check_section  # noqa: PLC0415

    st.session_state["toklab-ws"] = st.session_state["ws"]  # as ui.workspace.enter leaves it
    export_check_section("t-check", None, None)  # no export on the page: only the workspace's files


@pytest.mark.slow
def test_export_check_takes_the_workspace_model_files_with_paths_off(monkeypatch, tmp_path):
    """With server paths off, the section checks the model files a job kept in the workspace (issue 53, item 3): a
    zipped Hugging Face folder with weights and a .gguf, each named by its workspace name; job inputs are not
    offered."""
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    gpt2 = load_shared("gpt2")
    folder = tmp_path / "tiny"
    cfg = transformers.LlamaConfig(vocab_size=gpt2.vocab_size, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                   tie_word_embeddings=True, bos_token_id=50256, eos_token_id=50256)  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).eval().save_pretrained(str(folder), safe_serialization=True)
    write_accepted_forms(folder)  # the forms every reader accepts, as the app's model writers leave them
    write_files(folder, folder_files(gpt2, None))
    export_gguf(folder, gpt2, name="tiny")
    os.replace(folder / "tiny.gguf", tmp_path / "tiny.gguf")
    zip_folder(folder, tmp_path / "tiny.zip")
    store, ws = default_store(), default_store().create()
    store.put_file(ws, "artifact", "tiny.zip", {"job": "model-export"}, tmp_path / "tiny.zip")
    store.put_file(ws, "artifact", "tiny.gguf", {"job": "model-export"}, tmp_path / "tiny.gguf")
    store.put(ws, "artifact", "job-inputs/x.zip", {"job-input": "tokenizers"}, b"PK")
    at = AppTest.from_function(_workspace_section, default_timeout=300)
    at.session_state["ws"] = ws
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    which = at.selectbox(key="t-check-which")
    assert which.options == ["Workspace file: tiny.zip", "Workspace file: tiny.gguf"]
    at.multiselect(key="t-check-langs").set_value(["est_Latn"]).run()
    at.number_input(key="t-check-lines").set_value(2).run()
    docs = {}
    for name in ("tiny.gguf", "tiny.zip"):
        at.selectbox(key="t-check-which").set_value(f"Workspace file: {name}").run()
        at.button(key="t-check-run").click().run()
        assert not at.exception, [e.message for e in at.exception]
        job_id = store.inputs(ws)["job:t-check-job"]
        assert default_jobs().claim(job_id) == "run"
        run_claimed(default_jobs(), job_id, ws)
        at.run()
        docs[name] = at.session_state["t-check-report"]
        assert docs[name]["ok"], [e.value for e in at.error]  # both are sound exports
        assert any(f"**{name}**" in m.value for m in at.success)
    gguf, hf = docs["tiny.gguf"], docs["tiny.zip"]
    assert (gguf["path"], gguf["kind"], hf["path"], hf["kind"]) == ("tiny.gguf", "gguf", "tiny.zip", "folder")
    fits = next(c for c in hf["checks"] if c["name"] == "ids_fit")
    assert fits["status"] == "pass", fits  # the weights were read: one row per id
    if llama_cpp_available():
        assert gguf["parity"]["blocked"] is None and gguf["parity"]["totals"]["flores"]["share"] == 1.0
    text = json.dumps(docs)
    assert str(paths.data_dir()) not in text and str(tmp_path) not in text  # no server layout in the report
