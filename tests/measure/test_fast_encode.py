"""The fast encoder of bulk measurement (analysis.measure.fast_encode): gigatoken's ids equal tokenizers' where it
is used, and every way it can fail — an unsupported model, a difference, a panic, no gigatoken at all — keeps the
tokenizer on tokenizers, with the reason, and the same numbers."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import tokenizers
from badinput.bad_files import panic_merge_doc
from support import TOKENIZERS, flores_lines, load_shared, verified_encoder

from analysis.cli import main
from analysis.measure import fast_encode as fe
from analysis.measure import metrics as mx
from analysis.texts.flores import open_flores

#: the example tokenizers gigatoken supports (byte-level BPE, SentencePiece BPE with byte fallback)
SUPPORTED = ["llama-3.1", "qwen3"]
FEW = ["eng_Latn", "zho_Hans", "tha_Thai", "arb_Arab", "hin_Deva", "kor_Hang"]


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty disk cache (no stored verdicts) and nothing of this process's encoder state."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(fe.ENV_SWITCH, raising=False)
    fe.reset()
    yield
    fe.reset()


@pytest.fixture
def small_verification_set(own_cache, monkeypatch):
    """A verification set of two FLORES languages, two code files and the hostile set (so a test can verify)."""
    data = open_flores()
    monkeypatch.setattr(
        fe, "required_flores", lambda: {data.data_hash(c): c for c in ("eng_Latn", "tha_Thai")}
    )
    monkeypatch.setattr(
        fe, "code_lines", lambda: ["def f(x):\n    return x + 1\n", "int main() { return 0; }"]
    )
    return data


def _fast():
    if fe.fast_module()[0] is None:
        pytest.skip("gigatoken is not installed")


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def _panic_type() -> type[BaseException]:
    """pyo3's real PanicException class (tokenizers panics on a merge whose result is not in the vocabulary)."""
    try:
        tokenizers.Tokenizer.from_str(json.dumps(panic_merge_doc()))
    except BaseException as e:  # noqa: BLE001 - the panic is what we want
        assert not isinstance(e, Exception)
        return type(e)
    raise AssertionError("tokenizers did not panic")


@pytest.mark.parametrize("name", SUPPORTED)
def test_gigatoken_ids_equal_tokenizers_on_a_few_languages(name):
    """Fast lane of the 204-language test below: same ids on every line of six scripts."""
    _fast()
    tok = load_shared(name)
    fast, why = fe._load_fast(tok)
    assert fast is not None, why
    for lang in FEW:
        lines = flores_lines(lang)
        assert _same(fe.fast_encode(fast, lines), fe.reference_encode(tok, lines)), lang


@pytest.mark.slow
@pytest.mark.parametrize("name", SUPPORTED)
def test_gigatoken_ids_equal_tokenizers_on_every_flores_language(name):
    """Every devtest line of all 204 languages (and the code files and the hostile set): the ids (so every count
    the app prints) are the same — the app's own verification, whose comparison is
    :func:`~analysis.measure.fast_encode.first_difference` (whole arrays, then line by line), taken once per run in
    the run's disk cache (support.verified_encoder): the browser journey that measures Llama-3.1 on all 204
    languages (tests/e2e/test_measure_e2e.py) then encodes it with gigatoken instead of verifying it again."""
    _fast()
    status = verified_encoder(load_shared(name))
    assert status["encoder"].startswith("gigatoken"), status
    assert "every line of 204 FLORES devtest languages" in status["encoder_reason"], status


def test_a_shadow_compared_verification_switches_to_gigatoken_with_the_same_numbers(small_verification_set):
    """Measuring the verification set's languages verifies the tokenizer (stored on disk); from then on gigatoken
    encodes, and corpus_stats gives the same numbers as before."""
    _fast()
    tok = load_shared("llama-3.1")
    assert fe.encoder_status(tok)["encoder_reason"].startswith("being verified")
    before = {c: mx.corpus_stats(tok, flores_lines(c)) for c in ("eng_Latn", "tha_Thai")}  # shadow compares
    status = fe.encoder_status(tok)
    assert status["encoder"].startswith("gigatoken"), status
    assert "2 FLORES devtest languages, 2 code files" in status["encoder_reason"]
    fe.reset()  # a new process reads the stored verdict
    assert fe.uses_fast(tok)
    calls = []
    real = fe.fast_encode

    def counted(fast, lines):
        calls.append(len(lines))
        return real(fast, lines)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(fe, "fast_encode", counted)
        after = {c: mx.corpus_stats(tok, flores_lines(c)) for c in ("eng_Latn", "tha_Thai")}
    assert calls == [1012, 1012]
    assert after == before


def test_a_forced_mismatch_keeps_tokenizers_with_the_reason(small_verification_set, monkeypatch):
    _fast()
    tok = load_shared("qwen3")
    real = fe.fast_encode

    def wrong(fast, lines):
        flat, lens = real(fast, lines)
        flat = flat.copy()
        flat[0] += 1
        return flat, lens

    monkeypatch.setattr(fe, "fast_encode", wrong)
    lines = flores_lines("eng_Latn")
    assert _same(fe.encode_ids(tok, lines), fe.reference_encode(tok, lines))  # tokenizers' ids are returned
    status = fe.verify(tok)
    assert status["encoder"].startswith("tokenizers")
    assert "ids differ" in status["encoder_reason"] and "line 0" in status["encoder_reason"], status
    assert not fe.uses_fast(tok)


def test_a_rust_panic_keeps_tokenizers_and_withdraws_a_verdict(small_verification_set, monkeypatch):
    """A PanicException (a BaseException) while verifying, or after a verdict, never reaches the caller."""
    _fast()
    panic = _panic_type()
    tok = load_shared("llama-3.1")
    assert fe.verify(tok)["encoder"].startswith("gigatoken")

    def panics(fast, lines):
        raise panic("index out of bounds: the len is 3 but the index is 7")

    monkeypatch.setattr(fe, "fast_encode", panics)
    lines = flores_lines("kor_Hang")  # outside the verification set
    assert _same(fe.encode_ids(tok, lines), fe.reference_encode(tok, lines))
    status = fe.encoder_status(tok)
    assert status["encoder"].startswith("tokenizers")
    assert (
        "PanicException" in status["encoder_reason"] and "after its verification" in status["encoder_reason"]
    )
    other = load_shared("qwen3")  # a panic while being verified
    assert "gigatoken failed on a batch of 1012 lines (PanicException" in fe.verify(other)["encoder_reason"]


@pytest.mark.parametrize(
    ("name", "model"), [("bert-base-uncased", "WordPiece"), ("pegasus-unigram", "Unigram")]
)
def test_unsupported_models_stay_on_tokenizers(own_cache, name, model):
    _fast()
    tok = load_shared(name)
    lines = flores_lines("eng_Latn", 50)
    stats = mx.corpus_stats(tok, lines)
    status = fe.verify(tok)
    assert status["encoder"].startswith("tokenizers")
    assert f"cannot load this {model} tokenizer" in status["encoder_reason"], status
    assert mx.corpus_stats(tok, lines) == stats
    assert _same(fe.encode_ids(tok, lines), fe.reference_encode(tok, lines))


def test_without_gigatoken_compress_works_and_says_why(own_cache, monkeypatch, capsys):
    """The module made unimportable (as with no wheel for the platform): no traceback, the same numbers."""
    tok = load_shared("gpt2")
    lines = flores_lines("est_Latn")
    before = mx.corpus_stats(tok, lines)
    monkeypatch.setitem(sys.modules, "gigatoken", None)  # `import gigatoken` now raises ImportError
    fe.reset()
    assert fe.fast_module()[0] is None
    assert mx.corpus_stats(tok, lines) == before
    assert fe.verify(tok)["encoder"].startswith("tokenizers")
    rc = main(["compress", "-t", str(TOKENIZERS / "gpt2"), "--langs", "est_Latn", "--json", "--no-cache"])
    out = capsys.readouterr().out
    assert rc == 0
    (row,) = json.loads(out)
    assert row["encoder"].startswith("tokenizers")
    assert "gigatoken cannot be imported (ModuleNotFoundError" in row["encoder_reason"]
    assert row["tokens"] == before["tokens"]


def test_the_switch_turns_the_fast_encoder_off(own_cache, monkeypatch):
    monkeypatch.setenv(fe.ENV_SWITCH, "tokenizers")
    status = fe.encoder_status(load_shared("llama-3.1"))
    assert status["encoder"].startswith("tokenizers") and fe.ENV_SWITCH in status["encoder_reason"]


def test_the_hostile_set_covers_added_tokens_normalizers_and_byte_fallback():
    tok = load_shared("llama-2")  # SentencePiece BPE: byte fallback, a normalizer, <s> </s> <unk>
    lines = fe.hostile_lines(tok)
    for content in ("<s>", "</s>", "<unk>"):
        assert content in lines and f"x{content}y" in lines
    ids = fe.reference_encode(tok, lines)[0]
    assert any(
        t.startswith("<0x") for t in map(tok.tokenizer.id_to_token, ids.tolist())
    )  # byte fallback reached
    assert any(c in s for s in lines for c in "ｆﬁ\u0301")  # text a normalizer changes


def test_first_difference_names_the_line_and_the_token():
    ref = (np.array([1, 2, 3, 4]), np.array([2, 2]))
    assert fe.first_difference(["a", "b"], ref, ref) is None
    got = fe.first_difference(["a", "b"], ref, (np.array([1, 2, 3, 5]), np.array([2, 2])))
    assert got.startswith("line 1 ('b') differs from token 1")


def test_the_gigatoken_tokenizer_is_built_anew_to_bound_its_caches(monkeypatch):
    _fast()
    tok = load_shared("qwen3")
    fast, _ = fe._load_fast(tok)
    lines = flores_lines("est_Latn", 200)
    monkeypatch.setattr(fe, "RENEW_CHARS", sum(map(len, lines)) + 1)
    first = fe.fast_encode(fast, lines)
    inner = fast._tok
    again = fe.fast_encode(fast, lines)  # over the bound: a new tokenizer, the same ids
    assert fast._tok is not inner
    assert _same(first, again) and _same(first, fe.reference_encode(tok, lines))
