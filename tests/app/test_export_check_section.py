"""AppTest of the Export check section (ui/export_check.py) on Load & inspect: behind its button it runs the
export check on the selected tokenizer (a vocabulary-only GGUF in llama.cpp), shows the typed report, and its JSON
download is the document `python -m analysis export-check --json` prints for the same export."""

from __future__ import annotations

import io
import json
import os
import sys
import time
import zipfile

import pytest
from app_support import open_page
from download_support import record_downloads
from support import load_shared

from analysis.cli import main
from analysis.model.llamacpp import llama_cpp_available
from analysis.tokenizer.export import zip_bytes


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
    assert not at.exception, [e.message for e in at.exception]
    assert any(
        "llama.cpp is still being built (started " in w.value and "x.log" in w.value for w in at.warning
    )
