"""`python -m analysis inspect TOKENIZER [--json]`: one JSON object with the issue's fields; bad input
exits 2 with `error: ...` on stderr and no traceback."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from download_support import record_downloads
from streamlit.testing.v1 import AppTest
from support import ROOT, TOKENIZERS

from analysis.cli import main
from analysis.core.paths import public_document
from analysis.tokenizer.tokenizer import TokenizerSummary

REQUIRED = ("model_type", "vocab_size", "merges", "ignore_merges", "byte_fallback", "added_tokens")


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "analysis", "inspect", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def _inspect(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["inspect", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_subprocess_folder_llama31():
    r = _run(str(TOKENIZERS / "llama-3.1"), "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)  # the whole of stdout is one JSON object
    assert isinstance(s, dict) and all(k in s for k in REQUIRED)
    assert s["model_type"] == "BPE" and s["ignore_merges"] is True and s["byte_fallback"] is False
    assert s["vocab_size"] == 128256 and s["model_vocab_size"] == 128000  # vocab_size includes added
    assert s["merges"] == 280147 and s["added_tokens"] == 256


def test_subprocess_tokenizer_json_llama2():
    r = _run(str(TOKENIZERS / "llama-2" / "tokenizer.json"), "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["name"] == "llama-2" and s["byte_fallback"] is True and s["ignore_merges"] is False
    assert s["vocab_size"] == 32000 and s["merges"] == 61249 and s["added_tokens"] == 3


@pytest.mark.parametrize(
    "name,expected",
    [
        (
            "bert-base-uncased",
            {"model_type": "WordPiece", "merges": 0, "vocab_size": 30522, "added_tokens": 5},
        ),
        ("pegasus-unigram", {"model_type": "Unigram", "merges": 0, "vocab_size": 96103}),
        ("gpt2", {"model_type": "BPE", "merges": 50000, "vocab_size": 50257, "added_tokens": 1}),
        ("qwen3", {"model_type": "BPE", "merges": 151387, "vocab_size": 151669, "added_tokens": 26}),
        ("mistral-7b-v0.3", {"model_type": "BPE", "byte_fallback": True, "vocab_size": 32768}),
    ],
)
@pytest.mark.slow
def test_inspect_json_fields(capsys, name, expected):
    for target in (TOKENIZERS / name, TOKENIZERS / name / "tokenizer.json"):
        rc, out, err = _inspect(capsys, str(target), "--json")
        assert rc == 0 and err == ""
        s = json.loads(out)
        assert all(k in s for k in REQUIRED)
        assert isinstance(s["merges"], int) and isinstance(s["added_tokens"], int)
        assert isinstance(s["ignore_merges"], bool) and isinstance(s["byte_fallback"], bool)
        for k, v in expected.items():
            assert s[k] == v, (name, k, s[k])


def test_inspect_text_output(capsys):
    rc, out, _ = _inspect(capsys, str(TOKENIZERS / "bert-base-uncased"))
    assert rc == 0
    assert "model_type: WordPiece" in out and "continuing_subword_prefix: ##" in out
    assert "special_tokens: [PAD], [UNK], [CLS], [SEP], [MASK]" in out


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda tmp: str(tmp / "missing-folder"), "error: no such file or folder"),
        (lambda tmp: tmp, "holds no tokenizer files"),
        (lambda tmp: _write(tmp / "tokenizer.json", '{"model": '), "not valid JSON"),
        (lambda tmp: _write(tmp / "tokenizer.json", '{"a": 1}'), "not a tokenizer.json document"),
        (lambda tmp: _write(tmp / "tokenizer.model", "\n\x0enot a protobuf"), "not a SentencePiece model"),
        (lambda tmp: _write(tmp / "weights.bin", "\x00\x01\x02"), "unsupported file"),
        (lambda tmp: "not a/valid id!", "neither an existing path nor a valid hub id"),
    ],
)
def test_bad_input_exits_2_with_message(capsys, tmp_path, make, message):
    (tmp_path / "README.md").write_text("no tokenizer here")
    rc, out, err = _inspect(capsys, str(make(tmp_path)), "--json")
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert err.count("\n") == 1


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_subprocess_bad_input_no_traceback(tmp_path):
    bad = _write(tmp_path / "tokenizer.json", "{ this is not json")
    r = _run(str(bad), "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and "not valid JSON" in r.stderr and "Traceback" not in r.stderr
    r = _run("--json")  # missing TOKENIZER (optional where --model can stand in): a clear error, status 2
    assert (
        r.returncode == 2 and r.stderr.startswith("error: no tokenizer given") and "Traceback" not in r.stderr
    )


def test_page_download_is_the_cli_json(capsys, monkeypatch):
    """The Load & inspect page offers the document `inspect --json` prints, its source named by the folder's name
    (a download never carries the server's layout, also with server paths on)."""
    downloads = record_downloads(monkeypatch)
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(TOKENIZERS))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/inspect.py").run()
    at.text_input(key="inspect-path").input(str(TOKENIZERS / "llama-2")).run()
    at.button(key="inspect-load-path").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="inspect-pick").value == "llama-2"
    rc, out, _ = _inspect(capsys, str(TOKENIZERS / "llama-2"), "--json")
    assert rc == 0
    page = downloads["inspect-summary-json"].decode("utf-8")
    assert json.loads(page) == public_document(json.loads(out)) and json.loads(page)["name"] == "llama-2"
    assert json.loads(page)["source"] == "llama-2" and str(TOKENIZERS) not in page
    assert set(json.loads(page)) == {f.name for f in dataclasses.fields(TokenizerSummary)}
