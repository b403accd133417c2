"""Extension, the thesis' measurements (Kim 2025) and parity-aware auxiliary tokenizers: minimum-frequency
thresholds, characters per 2,048 tokens, a deterministic WordPiece supplement, parity-aware vs plain, and the
corpus executor giving the merges of the in-process run."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from support import FLORES, ROOT, TOKENIZERS, load_shared
from tokenizers import Tokenizer, trainers

from analysis.bpe.training import continue_training
from analysis.cli import main
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.measure.corpus_counts import bytes_per_token
from analysis.methods.extension import (
    ExtendResult,
    ParityText,
    compare_parity,
    heldout_measures,
    parity_text,
    plan,
    train_wordpiece_supplement,
)
from analysis.texts.flores import split_lines

TRAIN, HELD = split_lines("est_Latn")


def _wordpiece_tokens() -> list[str]:
    return train_wordpiece_supplement(load_shared("bert-base-uncased"), TRAIN, 1400).tokens


def test_wordpiece_supplement_is_the_same_run_to_run_and_across_processes():
    a, b = _wordpiece_tokens(), _wordpiece_tokens()
    assert a == b and len(a) == 1400
    code = (
        "import json, sys; sys.path[:0] = ['tests', 'tests/methods/extension']; from test_extend_thesis import _wordpiece_tokens; "
        "print(json.dumps(_wordpiece_tokens()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == a


def test_wordpiece_supplement_learns_what_the_tokenizers_trainer_learns():
    """Same method as the `tokenizers` WordPieceTrainer (BPE over pre-tokens, ## continuations): the vocabularies
    share almost every token; only ties between equally frequent pairs are ordered differently."""
    bert = load_shared("bert-base-uncased")
    ours = set(_wordpiece_tokens())
    hf = Tokenizer.from_str(bert.to_json())
    trainer = trainers.WordPieceTrainer(vocab_size=1400, show_progress=False, special_tokens=[])
    hf.train_from_iterator(TRAIN, trainer=trainer)
    theirs = set(hf.get_vocab())
    assert len(ours & theirs) >= 0.9 * len(theirs)
    assert {t for t in ours if not t.startswith("##") and len(t) > 3} & theirs


def test_min_frequency_thresholds_choose_how_many_tokens_are_added():
    bert = load_shared("bert-base-uncased")
    sizes, bpt = [], []
    for f in (20, 5, 2):
        p = plan(bert, "wordpiece", TRAIN, 64_000, min_frequency=f)
        ext = p.apply(p.n_available)
        sizes.append(ext.n_added)
        bpt.append(bytes_per_token(ext.tokenizer, HELD))
    assert sizes[0] < sizes[1] < sizes[2]
    assert bpt[0] < bpt[1] < bpt[2]  # more supplementary tokens, better compression on held-out Estonian
    # continued training: every added token's pair reached the threshold; the run stops at it
    gpt2 = load_shared("gpt2")
    full = continue_training(gpt2, TRAIN, 2000)
    p = plan(gpt2, "continued", TRAIN, 2000, min_frequency=10)
    freq = {s.token: s.freq for s in full.steps}
    assert p.n_available == sum(1 for s in full.steps if s.freq >= 10) < 2000
    assert all(freq[t] >= 10 for t in p.all_tokens())
    assert p.all_tokens() == full.new_tokens(p.n_available)
    with pytest.raises(DataError):
        plan(gpt2, "continued", TRAIN[:5], 10, min_frequency=10_000)


def test_characters_per_2048_tokens():
    gpt2 = load_shared("gpt2")
    ext = plan(gpt2, "continued", TRAIN, 300).apply(300)
    m = heldout_measures(gpt2, ext.tokenizer, HELD)
    tokens = sum(len(e.ids) for e in ext.tokenizer.tokenizer.encode_batch(HELD, add_special_tokens=False))
    assert m["chars_per_2048_after"] == pytest.approx(2048 * sum(map(len, HELD)) / tokens)
    assert m["chars_per_2048_after"] > m["chars_per_2048_before"]
    rep = ExtendResult(ext, 300, heldout={"est": HELD}).to_json()
    assert rep["chars_per_2048_after"] == m["chars_per_2048_after"] and rep["heldout"]["est"] == m


@pytest.mark.slow
def test_parity_aware_auxiliary_balances_the_languages():
    gpt2 = load_shared("gpt2")
    langs = ("est_Latn", "hin_Deva", "kor_Hang")
    pt = parity_text({c: split_lines(c)[0] for c in langs})
    assert pt.dev is not None and list(pt.dev) == list(langs)  # FLORES codes: parallel development sets
    for c in langs:  # the development lines (FLORES 701-800) are not training text
        assert len(pt.dev[c]) == 100 and not set(pt.dev[c]) & set(pt.corpora[c])
        assert len(pt.corpora[c]) == 700
    cmp, p = compare_parity(gpt2, "regen", 600, pt)
    assert p.aux is not None and p.aux.trainer == "parity" and p.aux.languages == langs
    assert cmp["plain"]["added"] == cmp["parity"]["added"] == 600
    plain, par = cmp["plain"]["summary"], cmp["parity"]["summary"]
    assert par["premium_gini"] < plain["premium_gini"] and par["premium_max"] < plain["premium_max"]
    assert cmp["base"]["summary"]["premium_max"] > plain["premium_max"]  # both extensions help the worst one
    with pytest.raises(DataError, match="at least two languages"):
        ParityText({"est_Latn": TRAIN})
    with pytest.raises(UnsupportedTokenizerError):
        plan(gpt2, "continued", TRAIN, 10, parity=pt)
    with pytest.raises(DataError, match="byte-level"):
        compare_parity(load_shared("llama-2"), "regen", 50, pt)


def _cli(args: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(args)
    return rc, buf.getvalue()


def _merges(folder: Path) -> list:
    return json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]


@pytest.fixture(scope="module")
def flores_subset(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("flores")
    for c in ("est_Latn", "fin_Latn", "hun_Latn", "eng_Latn"):
        (d / f"{c}.devtest").write_bytes((FLORES / "devtest" / f"{c}.devtest").read_bytes())
    return d


@pytest.mark.slow
def test_cli_local_executor_writes_the_merges_of_the_in_process_run(flores_subset, tmp_path):
    glob = str(flores_subset / "*.devtest")
    tok = str(TOKENIZERS / "gpt2")
    common = [
        "extend",
        "--tokenizer",
        tok,
        "--method",
        "continued",
        "--text",
        glob,
        "--n",
        "400",
        "--json",
        "--no-heldout",
    ]  # fmt: skip  (by default an in-process run holds out the end of the text)
    rc, out = _cli([*common, "--out", str(tmp_path / "a")])
    assert rc == 0 and json.loads(out)["corpus"]["executor"] == "inprocess"
    rc, out = _cli([*common, "--out", str(tmp_path / "b"), "--executor", "local", "--tasks", "8", "--workers", "2",
                    "--workdir", str(tmp_path / "wd")])  # fmt: skip
    rep = json.loads(out)
    assert rc == 0 and rep["corpus"]["executor"] == "local" and rep["corpus"]["map_tasks_run"] == 8
    assert _merges(tmp_path / "a") == _merges(tmp_path / "b")
    # … which are the merges of continued training on the same lines in one process
    lines = [
        s for f in sorted(flores_subset.glob("*.devtest")) for s in f.read_text("utf-8").splitlines() if s
    ]
    ref = continue_training(load_shared("gpt2"), lines, 400)
    assert _merges(tmp_path / "a")[-400:] == [list(m) for m in ref.merges()]


@pytest.mark.slow
def test_cli_min_frequency_and_parity(flores_subset, tmp_path):
    tok = str(TOKENIZERS / "gpt2")
    rc, out = _cli(["extend", "--tokenizer", tok, "--method", "regen", "--flores", "est_Latn", "--flores",
                    "fin_Latn", "--parity", "--n", "150", "--heldout-flores", "est_Latn", "--json"])  # fmt: skip
    rep = json.loads(out)
    assert (
        rc == 0
        and rep["auxiliary"]["trainer"] == "parity"
        and rep["parity"]["languages"] == ["est_Latn", "fin_Latn"]
    )
    assert rep["parity"]["dev"] and set(rep["parity"]["difference"]) >= {"premium_gini", "bytes_per_token"}
    assert rep["chars_per_2048_after"] > rep["chars_per_2048_before"]
    rc, out = _cli(["extend", "--tokenizer", tok, "--text", str(flores_subset / "est_Latn.devtest"),
                    "--min-frequency", "40", "--json"])  # fmt: skip
    rep = json.loads(out)
    assert rc == 0 and 0 < rep["added"] < 1000 and rep["min_frequency"] == 40


def test_cli_errors(flores_subset):
    tok = str(TOKENIZERS / "gpt2")
    for bad in (["--n", "10", "--parity"], ["--min-frequency", "-1"], ["--n", "10", "--model", "x"], []):
        rc, _ = _cli(["extend", "--tokenizer", tok, "--text", str(flores_subset / "est_Latn.devtest"), *bad])
        assert rc == 2, bad
    rc, _ = _cli(
        ["extend", "--tokenizer", tok, "--method", "regen", "--flores", "est_Latn", "--parity", "--n", "9"]
    )
    assert rc == 2  # one language: nothing to balance
    rc, _ = _cli(["extend", "--tokenizer", tok, "--flores", "est_Latn", "--n", "9", "--executor", "local"])
    assert rc == 2  # FLORES lines are read in this process
