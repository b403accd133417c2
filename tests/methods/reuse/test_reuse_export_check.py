"""R-BPE's safe default and the export check's round trip: the protections on by default (as on the page),
`--paper-exact` one switch away, and the difference shown by the export check (Odia and Gurmukhi break only
without the protections; the reused scripts break in both, the method's own price)."""

from __future__ import annotations

import json

import pytest
from support import TOKENIZERS

from analysis.cli import build_parser, main
from analysis.tokenizer.gguf_export import read_gguf_vocab_meta
from analysis.views.export_check import run_export_check

LANGS = ["ory_Orya", "pan_Guru", "hin_Deva", "rus_Cyrl", "eng_Latn", "arb_Arab"]


def test_reuse_protects_shared_symbols_by_default():
    args = build_parser().parse_args(["reuse", "x"])
    assert args.protect == "symbols" and not args.paper_exact
    assert build_parser().parse_args(["reuse", "x", "--paper-exact"]).paper_exact


@pytest.mark.slow
def test_export_check_shows_what_the_protections_save(tmp_path, capsys):
    reports = {}
    for name, extra in (("safe", ["--gguf"]), ("paper", ["--paper-exact"])):
        out = tmp_path / name
        rc = main(["reuse", str(TOKENIZERS / "llama-3.1"), "--no-corpora", "--collateral", "none", "--out",
                   str(out), "--json"] + extra)  # fmt: skip
        assert rc == 0
        doc = json.loads(capsys.readouterr().out)
        reports[name] = run_export_check(out, langs=LANGS, max_lines=100, parity=False).to_json()
        assert ("gguf" in doc) == (name == "safe")
    # --gguf: the base vocabulary (llama.cpp cannot run R-BPE's encoder), its pre-tokenizer named
    meta = read_gguf_vocab_meta(tmp_path / "safe" / "safe.gguf")
    assert meta["tokenizer.ggml.pre"] == "llama-bpe" and meta["tokenizer.ggml.tokens"] == 128256
    safe, paper = reports["safe"]["roundtrip"], reports["paper"]["roundtrip"]
    broken = {
        n: {e["lang"]: e.get("role") for e in r["entries"]} for n, r in (("safe", safe), ("paper", paper))
    }
    assert broken["safe"] == {"hin_Deva": "reused", "rus_Cyrl": "reused"}  # the method's own price
    assert broken["paper"] == {**broken["safe"], "ory_Orya": "kept", "pan_Guru": "kept"}
    assert "own price" in safe["note"] and safe["unexpected"] == [] and reports["safe"]["ok"]
    assert paper["unexpected"] == ["ory_Orya", "pan_Guru"] and not reports["paper"]["ok"]
    e = next(e for e in paper["entries"] if e["lang"] == "ory_Orya")
    assert e["text"] != e["decoded"]
    rc = main(["export-check", str(tmp_path / "paper"), "--langs", ",".join(LANGS), "--max-lines", "100",
               "--no-parity", "--json"])  # fmt: skip
    assert rc == 0 and json.loads(capsys.readouterr().out)["roundtrip"] == paper
