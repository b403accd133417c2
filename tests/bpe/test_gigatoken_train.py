"""parity-train's plain baseline trained by gigatoken (analysis.bpe.parity.train_plain_bpe): the same tokenizer as
the tokenizers BpeTrainer's, nothing printed on stdout, and the BpeTrainer wherever gigatoken cannot be used."""

from __future__ import annotations

import pytest
from support import flores_lines

from analysis.bpe import parity
from analysis.measure import fast_encode as fe

LINES = [
    s
    for lang in ("eng_Latn", "zho_Hans", "tha_Thai", "arb_Arab", "hin_Deva", "rus_Cyrl")
    for s in flores_lines(lang, 150)
]


def _bpe_trainer(monkeypatch, lines, vocab_size):
    with monkeypatch.context() as m:
        m.setattr(fe, "fast_module", lambda: (None, "switched off by the test"))
        return parity.train_plain_bpe(lines, vocab_size)


def test_gigatoken_trains_the_same_tokenizer_as_the_bpe_trainer(monkeypatch, capfd):
    if fe.fast_module()[0] is None:
        pytest.skip("gigatoken is not installed")
    merges, why = fe.train_bpe(LINES, 1200)
    assert merges, why
    capfd.readouterr()
    fast = parity.train_plain_bpe(LINES, 1200)
    assert capfd.readouterr().out == ""  # gigatoken's progress lines went to stderr
    assert fast.to_str() == _bpe_trainer(monkeypatch, LINES, 1200).to_str()


def test_the_bpe_trainer_where_gigatoken_cannot_train(monkeypatch):
    with_newline = [*LINES[:300], "two\nlines"]
    assert fe.train_bpe(with_newline, 600)[1].startswith("a document holds a newline")
    assert (
        parity.train_plain_bpe(with_newline, 600).to_str()
        == _bpe_trainer(monkeypatch, with_newline, 600).to_str()
    )

    def panics(*args, **kwargs):
        raise BaseException("a stand-in for a Rust panic")  # noqa: TRY002 - pyo3's PanicException is a BaseException

    class Module:
        train_bpe = staticmethod(panics)

    monkeypatch.setattr(fe, "fast_module", lambda: (Module, ""))
    merges, why = fe.train_bpe(LINES[:300], 600)
    assert not merges and why.startswith("gigatoken's trainer failed (BaseException")
    assert parity.train_plain_bpe(LINES[:300], 600).get_vocab_size() == 600
