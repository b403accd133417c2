"""Export (analysis.tokenizer.export): Hugging Face folder / zip that reloads exactly; the `extend` CLI."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
import tokenizers
from support import TOKENIZERS, flores_lines, load_shared
from transformers import AutoTokenizer

from analysis import cli
from analysis.core.outputs import json_ready, strict_json
from analysis.methods.extension import ExtendResult, PrefixSimulator, export_extension, plan
from analysis.texts.flores import split_lines as flores_split
from analysis.tokenizer.export import (
    export_document,
    folder_files,
    sync_post_processor,
    write_folder,
    zip_bytes,
)
from analysis.tokenizer.tokenizer import LoadedTokenizer


def _reload_matches(ext, folder, lines):
    """Both loaders reproduce the in-memory tokenization of lines (ids, no special tokens)."""
    ref = [e.ids for e in ext.tokenizer.tokenizer.encode_batch(lines, add_special_tokens=False)]
    fast = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert [e.ids for e in fast.encode_batch(lines, add_special_tokens=False)] == ref
    auto = AutoTokenizer.from_pretrained(str(folder))
    assert [auto.encode(s, add_special_tokens=False) for s in lines] == ref
    assert auto.encode("Tere") == ext.tokenizer.tokenizer.encode("Tere").ids  # specials too
    return ref


@pytest.mark.parametrize(
    "name,method",
    [
        ("llama-2", "continued"),
        pytest.param("qwen3", "continued", marks=pytest.mark.slow),
        ("gpt2", "regen"),
        ("mistral-7b-v0.3", "add-tokens"),
        ("bert-base-uncased", "wordpiece"),
    ],
)
@pytest.mark.slow
def test_exported_folder_reloads_and_tokenizes_like_the_preview(tmp_path, name, method):
    tok = load_shared(name)
    train, held = flores_split("est_Latn")
    p = plan(tok, method, train, 120)
    ext = p.apply(120)
    res = ExtendResult(ext, n_requested=120, text="FLORES est_Latn train", heldout={"est": held})
    out = tmp_path / "tok"
    written = export_extension(res, out)
    assert "extension_report.json" in written and "tokenizer.json" in written
    ref = _reload_matches(ext, out, held)
    if method in ("continued", "regen"):  # the in-app preview (simulator) gives the same ids
        sim = PrefixSimulator(tok, {"est": held})
        rows = sim.line_tokens("est", sim.segment(p.merges(120), p.tokens(120)))
        new_ids = dict(zip(ext.added, ext.added_ids))
        assert [sim.ids(r, new_ids) for r in rows] == ref
    doc = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    if doc["model"]["type"] == "BPE":
        assert all(isinstance(m, list) and len(m) == 2 for m in doc["model"]["merges"])
    saved = json.loads((out / "extension_report.json").read_text(encoding="utf-8"))
    assert saved["method"] == method and saved["added"] == ext.n_added
    assert saved["out"] == str(out.resolve()) and "model" not in saved
    # the written report is the result's one JSON document
    assert saved == json.loads(strict_json(json_ready(res.to_json())))
    assert saved["bytes_per_token_after"] >= saved["bytes_per_token_before"] * 0.99
    cfg = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    for a in doc["added_tokens"]:
        assert cfg["added_tokens_decoder"][str(a["id"])]["content"] == a["content"]


@pytest.mark.slow
def test_llama3_export_keeps_special_ids_and_reloads(tmp_path):
    tok = load_shared("llama-3.1")
    train, held = flores_split("est_Latn")
    ext = plan(tok, "continued", train, 300).apply(300)
    out = write_folder(ext.tokenizer, tmp_path / "l3")
    _reload_matches(ext, out, held[:100])
    auto = AutoTokenizer.from_pretrained(str(out))
    assert auto.convert_tokens_to_ids("<|begin_of_text|>") == 128000
    assert auto.convert_tokens_to_ids("<|eot_id|>") == 128009
    assert len(auto) == tok.vocab_size + 300


def test_zip_bytes_holds_a_loadable_folder(tmp_path):
    tok = load_shared("gpt2")
    ext = plan(tok, "continued", flores_lines("est_Latn")[:200], 50).apply(50)
    data = zip_bytes(ext.tokenizer, {"method": "continued"}, folder="gpt2-ext")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = set(zf.namelist())
        assert {
            "gpt2-ext/tokenizer.json",
            "gpt2-ext/tokenizer_config.json",
            "gpt2-ext/special_tokens_map.json",
            "gpt2-ext/extension_report.json",
        } <= names
        zf.extractall(tmp_path)
    _reload_matches(ext, tmp_path / "gpt2-ext", flores_lines("est_Latn")[800:850])


def test_string_merges_are_written_as_lists():
    tok = load_shared("gpt2")
    doc = tok.document()
    doc["model"]["merges"] = [" ".join(m) for m in tok.merges]

    legacy = LoadedTokenizer.from_document(doc, name="legacy")
    out = export_document(legacy)
    assert out["model"]["merges"][:2] == [list(m) for m in tok.merges[:2]]
    files = folder_files(legacy)
    assert set(files) == {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}


def test_sync_post_processor_rewrites_ids():
    doc = {
        "model": {"type": "WordPiece", "vocab": {"[CLS]": 7, "[SEP]": 9, "a": 0}},
        "added_tokens": [{"id": 3, "content": "<s>"}],
        "post_processor": {
            "type": "Sequence",
            "processors": [
                {
                    "type": "TemplateProcessing",
                    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
                },
                {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]},
            ],
        },
    }
    sync_post_processor(doc)
    procs = doc["post_processor"]["processors"]
    assert procs[0]["special_tokens"]["<s>"]["ids"] == [3]
    assert procs[1]["sep"] == ["[SEP]", 9] and procs[1]["cls"] == ["[CLS]", 7]


def test_cli_extend_json(tmp_path, capsys):
    train = tmp_path / "train.txt"
    held = tmp_path / "held.txt"
    lines = flores_lines("est_Latn")
    train.write_text("\n".join(lines[:300]), encoding="utf-8")
    held.write_text("\n".join(lines[800:]), encoding="utf-8")

    rc = cli.main(
        [
            "extend",
            "--tokenizer",
            str(TOKENIZERS / "gpt2"),
            "--method",
            "merges",
            "--text",
            str(train),
            "--n",
            "80",
            "--heldout",
            str(held),
            "--out",
            str(tmp_path / "o"),
            "--no-robustness",  # measured in tests/measure/test_robustness.py
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["added"] == 80 and out["method"] == "merges" and "robustness" not in out
    assert isinstance(out["unreachable_added"], int)
    assert out["bytes_per_token_after"] > out["bytes_per_token_before"]
    assert (tmp_path / "o" / "tokenizer.json").is_file()
    rc = cli.main(
        [
            "extend",
            "--tokenizer",
            str(TOKENIZERS / "gpt2"),
            "--text",
            str(tmp_path / "missing.txt"),
            "--n",
            "5",
        ]
    )
    assert rc == 2
