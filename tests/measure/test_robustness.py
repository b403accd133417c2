"""Robustness before → after an edit (analysis.measure.robustness) on the shared tokenizers: words kept whole
(STRR), digit grouping, the hostile round trip, encode times; extending gpt2 for Estonian raises Estonian's STRR."""

from __future__ import annotations

import json

import pytest
from support import FLORES, TOKENIZERS, load_shared

from analysis.cli import main
from analysis.measure.robustness import (
    digit_grouping,
    encode_times,
    grouping,
    offsets_encoder,
    robustness_delta,
    tokenizer_robustness,
    word_pieces,
)
from analysis.methods.extension.plan import plan
from analysis.texts.flores import split_lines
from analysis.texts.probes import HOSTILE


def test_words_kept_whole_and_their_splits_in_context():
    gpt2 = load_shared("gpt2")
    line = "The house is beautiful: kõrvalmaja"
    offs = gpt2.tokenizer.encode(line, add_special_tokens=False).offsets
    pieces = word_pieces(line, offs)
    assert pieces[:4] == [(), (), (), ()]  # "The", " house", " is", " beautiful" are one token each
    assert pieces[4] and all(0 < c < len("kõrvalmaja") for c in pieces[4])  # split inside the word


def test_grouping_classes():
    assert grouping(7, (1, 4)) == "right" and grouping(7, (3, 6)) == "left"
    assert (
        grouping(4, (1, 2, 3)) == "single" and grouping(5, (2,)) == "right" and grouping(5, (1,)) == "other"
    )
    assert grouping(4, (1, 1, 4)) == "right"  # repeated and edge boundaries are one cut / none


def test_digit_grouping_and_round_trip_of_real_tokenizers():
    llama3, qwen3, gpt2 = load_shared("llama-3.1"), load_shared("qwen3"), load_shared("gpt2")
    numbers = ["1234567 and 98765", "20261206"]
    assert digit_grouping(offsets_encoder(llama3), numbers)["left"] == 1.0  # \p{N}{1,3} from the left
    assert digit_grouping(offsets_encoder(qwen3), numbers)["single"] == 1.0  # one digit per token
    g = tokenizer_robustness(gpt2, pathological={})
    assert (g.round_trip_ok, g.round_trip_total) == (len(HOSTILE), len(HOSTILE))  # byte-level: lossless
    q = tokenizer_robustness(qwen3, pathological={})
    assert "NFD é" in {f["input"] for f in q.round_trip_failures}  # its NFC normalizer composes é


def test_encode_times_are_measured_and_flagged_only_when_slow():
    (row,) = encode_times(load_shared("gpt2"), {"one character": "a" * 4096})
    assert row["bytes"] == 4096 and row["projected"] is False and row["slow"] == (row["seconds"] >= 1.0)


def test_extending_gpt2_for_estonian_raises_estonian_strr():
    gpt2 = load_shared("gpt2")
    train, held = split_lines("est_Latn")
    ext = plan(gpt2, "continued", train, 300).apply(300).tokenizer
    rep = robustness_delta(gpt2, ext, {"est_Latn": held}, pathological={})
    (row,) = rep.to_json()["languages"]
    assert row["lang"] == "est_Latn" and row["strr_after"] > row["strr_before"] and row["split_changed"] > 0


@pytest.mark.slow
def test_extend_cli_report_carries_robustness(capsys):
    args = [
        "extend",
        "--tokenizer",
        str(TOKENIZERS / "gpt2"),
        "--method",
        "continued",
        "--flores",
        "est_Latn",
    ]
    assert main([*args, "--n", "200", "--json", "--quiet"]) == 0
    rob = json.loads(capsys.readouterr().out)["robustness"]
    (row,) = rob["languages"]
    assert row["lang"].startswith("est_Latn") and row["strr_after"] > row["strr_before"]
    assert {e["input"] for e in rob["after"]["encode_seconds"]} >= {"one character", "Thai without spaces"}


@pytest.mark.slow
def test_prune_cli_report_carries_robustness(tmp_path, capsys):
    base = ["prune", "--tokenizer", str(TOKENIZERS / "gpt2"), "--order", "leaf-frequency", "--n", "2000", "--no-stt",
            "--text", str(FLORES / "devtest" / "eng_Latn.devtest"), "--quiet"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "p"), "--robustness-flores", "est_Latn", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["robustness"]["languages"]
    assert row["lang"] == "est_Latn" and row["split_changed"] > 0  # pruned tokens were used by Estonian words
    saved = json.loads((tmp_path / "p" / "prune_report.json").read_text(encoding="utf-8"))
    assert saved["robustness"]["languages"][0] == row
    assert main([*base, "--out", str(tmp_path / "q"), "--robustness-flores", "xx_Nope"]) == 2
    assert "xx_Nope" in capsys.readouterr().err and not (tmp_path / "q").exists()  # refused before the work
