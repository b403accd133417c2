"""Parity-aware BPE (analysis/bpe/parity.py): the training helper, the FLORES comparison, the CLI."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest
from download_support import record_downloads, without
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared

from analysis.bpe import parity
from analysis.cli import main
from analysis.errors import DataError
from analysis.texts import flores

LANGS = ["eng_Latn", "fra_Latn", "hin_Deva", "arb_Arab", "zho_Hans", "amh_Ethi", "rus_Cyrl", "tha_Thai"]


def _corpora(n: int = 300) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    train = {c: flores.split_lines(c)[0][:n] for c in LANGS}
    dev = {c: flores.split_lines(c)[0][700:] for c in LANGS}
    return train, dev


def test_train_parity_bpe_has_the_asked_size_and_round_trips():
    train, dev = _corpora(150)
    tok = parity.train_parity_bpe(train, 1000, dev=dev)
    plain = parity.train_plain_bpe([s for c in LANGS for s in train[c]], 1000)
    assert tok.get_vocab_size() == plain.get_vocab_size() == 1000
    assert set(parity.pre_tokenizers.ByteLevel.alphabet()) <= set(tok.get_vocab())
    for lang in LANGS:
        line = flores.split_lines(lang)[1][0]
        assert tok.decode(tok.encode(line).ids) == line
    # a byte-level template gives its pre-tokenizer (Llama-3's Split regex, not GPT-2's), specials count in the size
    templated = parity.train_parity_bpe(
        train, 1000, dev=dev, template=load_shared("llama-3.1"), special_tokens=["<|a|>", "<|b|>"]
    )
    assert "Split" in templated.to_str() and "Split" not in tok.to_str()
    assert templated.get_vocab_size() == 1000 and templated.token_to_id("<|a|>") is not None


@pytest.mark.slow
def test_parity_balances_premiums_on_held_out_lines():
    train, dev = _corpora(700)
    held = {c: flores.split_lines(c)[1] for c in LANGS}
    par = parity.summarize(parity.measure(parity.train_parity_bpe(train, 2000, dev=dev), held))
    plain = parity.summarize(
        parity.measure(parity.train_plain_bpe([s for c in LANGS for s in train[c]], 2000), held)
    )
    assert par["premium_gini"] < plain["premium_gini"] and par["premium_max"] < plain["premium_max"]
    assert par["languages"] == plain["languages"] == len(LANGS)


def test_bad_arguments():
    train, dev = _corpora(50)
    with pytest.raises(DataError, match="variant"):
        parity.train_parity_bpe(train, 1000, dev=dev, variant="greedy")
    with pytest.raises(DataError, match="development sets"):
        parity.train_parity_bpe(train, 1000, dev=list(dev.values())[:2])
    with pytest.raises(DataError, match="below the 256 bytes"):
        parity.train_parity_bpe(train, 100)
    with pytest.raises(DataError, match="byte-level BPE template"):
        parity.empty_tokenizer(load_shared("llama-2"))
    with pytest.raises(DataError, match="must be"):
        parity.flores_splits(["eng_Latn"], 790, 100)


def test_comparison_and_cli(tmp_path):
    langs = "eng_Latn,hin_Deva,tha_Thai,fra_Latn"
    comparison = parity.parity_comparison(1200, langs, n_train=150, n_dev=50, use_cache=False)
    res = comparison.to_json()
    assert set(res) == {"params", "plain", "parity", "cost"} and comparison.tokenizers is None
    assert res["params"]["languages"] == langs.split(",")
    for kind in parity.KINDS:
        assert res[kind]["vocab_size"] == 1200 and len(res[kind]["rows"]) == 4
        eng = next(r for r in res[kind]["rows"] if r["lang"] == "eng_Latn")
        assert eng["premium"] == 1.0
    cost = res["cost"]
    s_plain, s_par = res["plain"]["summary"], res["parity"]["summary"]
    assert cost["premium_gini"] == s_par["premium_gini"] - s_plain["premium_gini"]
    assert cost["bytes_per_token_relative"] == s_par["bytes_per_token"] / s_plain["bytes_per_token"] - 1
    # the CLI: JSON and a written folder with both tokenizers
    buf = io.StringIO()
    out = tmp_path / "parity"
    with redirect_stdout(buf):
        rc = main(["parity-train", "--vocab-size", "1200", "--langs", langs, "--n-train", "150", "--n-dev", "50",
                   "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    doc = json.loads(buf.getvalue())
    assert doc["plain"]["summary"] == s_plain and doc["parity"]["summary"] == s_par
    assert (out / "plain" / "tokenizer.json").is_file() and (out / "parity" / "tokenizer.json").is_file()
    assert doc["out"] == str(out.resolve())
    written = json.loads((out / parity.REPORT_FILE).read_text(encoding="utf-8"))
    assert written == without(doc, {"out"})  # the report in the folder is the printed document
    # the second run comes from the cache (same numbers) and the text output names both tokenizers
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert (
            main(
                [
                    "parity-train",
                    "--vocab-size",
                    "1200",
                    "--langs",
                    langs,
                    "--n-train",
                    "150",
                    "--n-dev",
                    "50",
                ]
            )
            == 0
        )
    assert "plain" in buf.getvalue() and "parity − plain" in buf.getvalue()
    with redirect_stdout(io.StringIO()):
        assert main(["parity-train", "--vocab-size", "1200", "--langs", langs, "--n-train", "150", "--n-dev", "50",
                     "--out", str(out)]) == 2  # fmt: skip


@pytest.mark.slow
def test_compression_page_section(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    got = record_downloads(monkeypatch)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/compression.py").run()
    at.number_input(key="cmp-par-vocab").set_value(1000).run()
    at.radio(key="cmp-par-scope").set_value("chosen").run()
    langs = ["eng_Latn", "hin_Deva", "tha_Thai", "rus_Cyrl"]
    at.multiselect(key="cmp-par-langs").set_value(langs).run()
    at.button(key="cmp-par-run").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception]
    res = parity.parity_comparison(1000, langs).to_json()  # the page's result, now from the cache
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Gini of premiums"] == f"{res['parity']['summary']['premium_gini']:.4f}"
    table = next(d.value for d in at.dataframe if "premium parity" in d.value.columns)
    assert sorted(table["lang"]) == sorted(langs)
    assert any(b.label == "Download the comparison (JSON)" for b in at.get("download_button"))
    # the download is the document `parity-train --json` prints (from the same cache)
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["parity-train", "--vocab-size", "1000", "--langs", ",".join(langs), "--json"])
    assert rc == 0 and got["cmp-par-dl"].decode("utf-8") == buf.getvalue()
