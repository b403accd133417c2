"""Loading from every source: folders, tokenizer.json uploads, zipped folders, SentencePiece .model and
tiktoken ranks files (checked against the shipped tokenizers on FLORES lines), the embedded default, and
the clear errors for bad input."""

from __future__ import annotations

import base64
import io
import json
import unicodedata
import zipfile

import pytest
import tokenizers
from support import ALL_TOKENIZERS, TOKENIZERS, flores_lines, load_shared

from analysis import TokenizerLoadError, load, load_upload
from analysis.core.cache import clear_memory, store_dir
from analysis.tokenizer import converters
from analysis.tokenizer import sources as src
from analysis.tokenizer.defaults import QWEN_SPECIALS, default_tokenizer
from analysis.tokenizer.document import MODEL_TYPES
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: 20 FLORES languages over many scripts (Latin, Cyrillic, Han, Kana, Hangul, Arabic, Indic, Thai, Ethiopic...)
LANGS = [
    "eng_Latn", "fra_Latn", "deu_Latn", "est_Latn", "vie_Latn", "tur_Latn", "yor_Latn", "rus_Cyrl",
    "ell_Grek", "zho_Hans", "jpn_Jpan", "kor_Hang", "arb_Arab", "heb_Hebr", "hin_Deva", "ben_Beng",
    "tam_Taml", "tha_Thai", "amh_Ethi", "kat_Geor",
]  # fmt: skip
#: awkward inputs: runs of spaces, leading/trailing blanks, tabs, newlines, emoji, ligatures, empty
EDGE_TEXTS = [
    "  Hello\n\nworld  ", "\tTab\there", "Hello  world", "\u00a0nbsp", "ﬁ ligature Ⅻ", "😀 emoji 𝔘",
    "", " ", "\n lead", "x  \n  y ", "don't I'LL 12345 ...",
]  # fmt: skip
SAMPLE = flores_lines("eng_Latn", 5) + flores_lines("zho_Hans", 3) + flores_lines("rus_Cyrl", 3) + EDGE_TEXTS


def _flores(n: int = 50, langs: list[str] = LANGS) -> list[str]:
    return [line for lang in langs for line in flores_lines(lang, n)]


def _mismatches(a: tokenizers.Tokenizer, b: tokenizers.Tokenizer, lines: list[str], specials=False) -> list:
    ea = a.encode_batch(lines, add_special_tokens=specials)
    eb = b.encode_batch(lines, add_special_tokens=specials)
    return [(line[:60], x.tokens[:12], y.tokens[:12]) for line, x, y in zip(lines, ea, eb) if x.ids != y.ids]


def _zip_folder(folder, prefix: str = "", stored: bool = True, extra: dict | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.iterdir()):
            zf.write(p, prefix + p.name)
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------------
# every shared tokenizer: from a folder, as a tokenizer.json upload, as a zipped folder
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_folder_load(name):
    tok = load_shared(name)
    model = tok.model  # the raw section (no deep copy: gemma's is 256k entries)
    added = tok.added_tokens
    assert tok.name == name and tok.source == str(TOKENIZERS / name)
    assert tok.model_type == model["type"] and tok.model_type in MODEL_TYPES
    model_ids = set(tok.vocab.values())
    assert len(model_ids) == len(model["vocab"])
    assert tok.vocab_size == len(model_ids | {a.id for a in added})  # includes added tokens
    assert tok.tokenizer.padding is None and tok.tokenizer.truncation is None
    assert all(enc.ids for enc in tok.tokenizer.encode_batch(SAMPLE[:11], add_special_tokens=False))
    assert len(tok.content_hash) == 16
    s = tok.summary()
    assert s["model_type"] == tok.model_type and s["vocab_size"] == tok.vocab_size
    assert s["merges"] == (len(model.get("merges") or []) if tok.model_type == "BPE" else 0)
    assert s["added_tokens"] == len(added)
    assert set(s["special_tokens"]) == {a.content for a in added if a.special}


@pytest.mark.parametrize("name", ["gpt2", "bert-base-uncased", "llama-2", "pegasus-unigram"])
def test_folder_load_matches_rust_from_file(name):
    tok = load_shared(name)
    ref = tokenizers.Tokenizer.from_file(str(TOKENIZERS / name / "tokenizer.json"))
    ref.no_padding()
    ref.no_truncation()  # the shipped BERT file truncates at 128; LoadedTokenizer switches that off
    assert tok.vocab_size == ref.get_vocab_size(with_added_tokens=True)
    assert tok.vocab == ref.get_vocab(with_added_tokens=False)
    assert not _mismatches(tok.tokenizer, ref, SAMPLE, specials=True)


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_tokenizer_json_upload(name):
    data = (TOKENIZERS / name / "tokenizer.json").read_bytes()
    up = load_upload("tokenizer.json", data, name=name)
    folder = load_shared(name)
    assert up.content_hash == folder.content_hash
    assert up.source == "upload:tokenizer.json"
    assert up.vocab_size == folder.vocab_size
    assert not _mismatches(up.tokenizer, folder.tokenizer, SAMPLE, specials=True)
    if name in (
        "gpt2",
        "bert-base-uncased",
        "llama-2",
    ):  # a tokenizer.json given as a path loads the same way
        by_path = load(TOKENIZERS / name / "tokenizer.json")
        assert by_path.content_hash == folder.content_hash and by_path.name == name


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_zipped_folder_upload(name):
    # nested top folder plus macOS junk: the loader finds the tokenizer folder
    data = _zip_folder(TOKENIZERS / name, prefix=f"{name}/", extra={"__MACOSX/._tokenizer.json": b"junk"})
    up = load_upload(f"{name}.zip", data)
    folder = load_shared(name)
    assert up.name == name and up.source == f"upload:{name}.zip"
    assert up.content_hash == folder.content_hash  # tokenizer.json is preferred over .model / vocab files
    assert not _mismatches(up.tokenizer, folder.tokenizer, SAMPLE, specials=True)


def test_zip_deflated_flat_and_config_kept():
    data = _zip_folder(TOKENIZERS / "gpt2", stored=False)
    up = load_upload("gpt2.zip", data)
    assert up.vocab_size == 50257
    assert up.config.get("model_max_length") == load_shared("gpt2").config.get("model_max_length")


def test_slow_tokenizer_files_gpt2_and_bert(tmp_path):
    """Folders with only vocab.json + merges.txt (GPT-2) or vocab.txt (BERT) are converted."""
    (tmp_path / "gpt2").mkdir()
    for f in ("vocab.json", "merges.txt"):
        (tmp_path / "gpt2" / f).write_bytes((TOKENIZERS / "gpt2" / f).read_bytes())
    gpt2 = load(tmp_path / "gpt2")
    ref = load_shared("gpt2")
    assert gpt2.vocab == ref.vocab and gpt2.merges == ref.merges
    assert not _mismatches(gpt2.tokenizer, ref.tokenizer, _flores(10, LANGS[:8]))
    (tmp_path / "bert").mkdir()
    for f in ("vocab.txt", "tokenizer_config.json"):
        (tmp_path / "bert" / f).write_bytes((TOKENIZERS / "bert-base-uncased" / f).read_bytes())
    bert = load(tmp_path / "bert")
    ref = load_shared("bert-base-uncased")
    assert bert.model_type == "WordPiece" and bert.vocab == ref.vocab
    assert not _mismatches(bert.tokenizer, ref.tokenizer, _flores(10, LANGS[:8]), specials=True)


# --------------------------------------------------------------------------------------------------
# SentencePiece .model → fast tokenizer
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def converted_spm():
    """The three shipped tokenizer.model files converted by analysis.tokenizer.sources (cached for the module)."""
    return {
        n: load_upload("tokenizer.model", (TOKENIZERS / n / "tokenizer.model").read_bytes(), name=n)
        for n in ("llama-2", "mistral-7b-v0.1", "mistral-7b-v0.3")
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama-2", "mistral-7b-v0.1"])
def test_sentencepiece_conversion_equals_shipped_tokenizer_json(converted_spm, name):
    conv, ref = converted_spm[name], load_shared(name)
    assert conv.model_type == "BPE" and conv.byte_fallback and conv.is_sentencepiece_style
    assert conv.vocab == ref.vocab
    assert set(conv.merges) == set(ref.merges)
    assert [(a.id, a.content, a.special) for a in conv.added_tokens] == [
        (a.id, a.content, a.special) for a in ref.added_tokens
    ]
    lines = _flores(50) + EDGE_TEXTS  # 20 languages x 50 lines
    assert not _mismatches(conv.tokenizer, ref.tokenizer, lines)
    assert not _mismatches(conv.tokenizer, ref.tokenizer, lines[::25], specials=True)  # BOS like Llama's
    for line in lines[::97]:
        ids = conv.tokenizer.encode(line, add_special_tokens=False).ids
        assert conv.tokenizer.decode(ids) == ref.tokenizer.decode(ids)


def test_sentencepiece_conversion_mistral_v03(converted_spm):
    """v0.3's shipped file uses the newer non-legacy Metaspace; on ordinary text both agree."""
    conv, ref = converted_spm["mistral-7b-v0.3"], load_shared("mistral-7b-v0.3")
    assert conv.vocab == ref.vocab and set(conv.merges) == set(ref.merges)
    assert len(conv.added_tokens) == len(ref.added_tokens) == 771
    assert not _mismatches(conv.tokenizer, ref.tokenizer, _flores(20))


@pytest.mark.parametrize("name", ["llama-2", "mistral-7b-v0.1", "mistral-7b-v0.3"])
def test_sentencepiece_conversion_equals_sentencepiece_library(converted_spm, name):
    """Ground truth: the sentencepiece library itself, including leading/double spaces and newlines."""
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_proto=(TOKENIZERS / name / "tokenizer.model").read_bytes())
    conv = converted_spm[name]
    lines = EDGE_TEXTS + _flores(10)
    got = conv.tokenizer.encode_batch(lines, add_special_tokens=False)
    bad = [(t, sp.encode(t, out_type=str), g.tokens) for t, g in zip(lines, got) if sp.encode(t) != g.ids]
    assert not bad


@pytest.mark.parametrize(
    "model_type,rule,extra_ws,byte_fallback",
    [
        ("bpe", "identity", False, True),  # Llama-like
        ("bpe", "nmt_nfkc", True, False),  # default SentencePiece normalisation
        ("unigram", "nmt_nfkc", True, False),  # T5 / Pegasus-like
        ("unigram", "identity", True, True),
    ],
)
def test_sentencepiece_conversion_of_freshly_trained_models(model_type, rule, extra_ws, byte_fallback):
    """Train tiny SentencePiece models in memory and check the converter against the library."""
    spm = pytest.importorskip("sentencepiece")
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(flores_lines("eng_Latn", 150) + flores_lines("rus_Cyrl", 100)),
        model_writer=buf,
        vocab_size=600,
        model_type=model_type,
        normalization_rule_name=rule,
        remove_extra_whitespaces=extra_ws,
        byte_fallback=byte_fallback,
        character_coverage=0.999,
        minloglevel=2,
    )
    data = buf.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=data)
    conv = load_upload("tiny.model", data)
    assert conv.model_type == {"bpe": "BPE", "unigram": "Unigram"}[model_type]
    assert conv.byte_fallback == byte_fallback
    lines = EDGE_TEXTS + flores_lines("eng_Latn", 200)[150:] + flores_lines("deu_Latn", 20)
    lines += flores_lines("jpn_Jpan", 5)
    got = conv.tokenizer.encode_batch(lines, add_special_tokens=False)
    bad = [(t, sp.encode(t, out_type=str), g.tokens) for t, g in zip(lines, got) if sp.encode(t) != g.ids]
    assert not bad


# --------------------------------------------------------------------------------------------------
# tiktoken ranks file → byte-level BPE
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_tiktoken_file_from_llama31_vocab_reproduces_llama31(tmp_path):
    ref = load_shared("llama-3.1")
    items = sorted(ref.vocab.items(), key=lambda kv: kv[1])
    lines = [f"{base64.b64encode(ref.token_bytes(t)).decode()} {i}" for t, i in items]
    path = tmp_path / "llama3.tiktoken"
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    assert converters.guess_tiktoken_pattern(len(lines)) == "cl100k_base / Llama-3"
    tok = load(path)  # file path → load_upload → tiktoken converter with the guessed split regex
    doc = tok.document()
    assert (
        doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
        == converters.TIKTOKEN_PATTERNS["cl100k_base / Llama-3"]
    )
    assert tok.ignore_merges and tok.is_byte_level and tok.model_type == "BPE"
    assert tok.vocab == ref.vocab
    assert tok.merges == ref.merges  # every two-token split, ranked like Llama-3.1's own list
    assert not _mismatches(tok.tokenizer, ref.tokenizer, _flores(50) + EDGE_TEXTS)


def test_tiktoken_upload_with_explicit_pattern_and_specials():
    ranks = "\n".join(f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256))
    ranks += "\n" + base64.b64encode(b"ab").decode() + " 256\n"
    doc = converters.tiktoken_to_document(
        ranks.encode(), pattern="r50k / GPT-2", special_tokens={"<|eot|>": 257}
    )

    tok = LoadedTokenizer.from_document(doc, name="tiny")
    assert tok.vocab_size == 258 and tok.merges == [("a", "b")]
    assert tok.tokenizer.encode("abab<|eot|>", add_special_tokens=False).tokens == ["ab", "ab", "<|eot|>"]
    up = load_upload("tiny.tiktoken", ranks.encode(), tiktoken_pattern="r50k / GPT-2")
    assert up.vocab_size == 257


# --------------------------------------------------------------------------------------------------
# the embedded default (Qwen's qwen.tiktoken) equals Qwen3's vocabulary, merges and tokenization
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_embedded_default_equals_qwen3():
    d = default_tokenizer()  # converted once, then read from Tokenizer Lab's on-disk cache
    assert list((store_dir() / "default-tokenizer").glob("*.json"))
    clear_memory()
    again = default_tokenizer()
    assert again.content_hash == d.content_hash and again.source == "embedded"
    q = load_shared("qwen3")
    assert d.vocab == q.vocab
    assert d.merges == q.merges
    for content, i in QWEN_SPECIALS.items():
        assert d.tokenizer.token_to_id(content) == q.tokenizer.token_to_id(content) == i
    # Qwen3 NFC-normalises; the tiktoken port does not: compare on NFC text
    lines = [unicodedata.normalize("NFC", line) for line in _flores(50)]
    assert not _mismatches(d.tokenizer, q.tokenizer, lines)


# --------------------------------------------------------------------------------------------------
# errors: clear TokenizerLoadError messages
# --------------------------------------------------------------------------------------------------
def test_folder_without_tokenizer_files(tmp_path):
    (tmp_path / "README.md").write_text("nothing here")
    with pytest.raises(TokenizerLoadError, match="holds no tokenizer files"):
        load(tmp_path)


def test_missing_local_path():
    with pytest.raises(TokenizerLoadError, match="no such file or folder"):
        load("./no/such/folder")
    with pytest.raises(TokenizerLoadError, match="no tokenizer given"):
        load("  ")


@pytest.mark.parametrize(
    "data,match",
    [
        (b'{"model": {"type": "BPE", "vocab"', "not valid JSON"),
        (b'{"hello": "world"}', "not a tokenizer.json document"),
        (b"[1, 2, 3]", "not a tokenizer.json document"),
        (b'{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "zz"]]}}', "rejected"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_corrupt_or_foreign_json(data, match):
    with pytest.raises(TokenizerLoadError, match=match):
        load_upload("tokenizer.json", data)


def test_corrupt_json_on_disk(tmp_path):
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "model": ')
    with pytest.raises(TokenizerLoadError, match="not valid JSON"):
        load(tmp_path)


def test_tokenizer_config_alone_and_empty_and_unsupported():
    with pytest.raises(TokenizerLoadError, match="does not define a tokenizer"):
        load_upload("tokenizer_config.json", b"{}")
    with pytest.raises(TokenizerLoadError, match="is empty"):
        load_upload("tokenizer.json", b"")
    with pytest.raises(TokenizerLoadError, match="unsupported file 'model.safetensors'"):
        load_upload("model.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")


def test_corrupt_sentencepiece_model():
    with pytest.raises(TokenizerLoadError, match="not a SentencePiece model"):
        load_upload("tokenizer.model", b"\n\x0ethis is not a protobuf \xff\xff\xff")
    with pytest.raises(TokenizerLoadError, match="not a SentencePiece model"):
        load_upload("tokenizer.model", (TOKENIZERS / "llama-2" / "tokenizer.model").read_bytes()[:5000])
    # a piece that is not UTF-8 (protobuf hands it back as bytes, which ended in a TypeError): '▁the' → '▁\xffhe'
    data = (TOKENIZERS / "llama-2" / "tokenizer.model").read_bytes()
    piece = b"\n\x06" + "▁the".encode()  # the piece field's tag and length, then its 6 bytes
    assert data.count(piece) == 1
    with pytest.raises(TokenizerLoadError, match=r"piece #\d+ is not UTF-8 text"):
        load_upload("tokenizer.model", data.replace(piece, b"\n\x06\xe2\x96\x81\xffhe"))


def _bare_doc(model: dict) -> dict:
    """A document with only a whitespace pre-tokenizer around `model`."""
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None, "model": model}  # fmt: skip


def test_a_tokenizer_that_cannot_encode_an_unseen_character_is_refused_at_load():
    """The library raises on a character outside the vocabulary when the unknown token is missing: found by the
    mutation fuzzer as a vocab.txt whose [UNK] line was damaged; `compress` then ended in a traceback."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    with pytest.raises(
        TokenizerLoadError, match=r"cannot encode a character outside its vocabulary.*\[UNK\]"
    ):
        load_upload("vocab.txt", ("[PAD]\n[CLS]\n[SEP]\n" + "\n".join(letters) + "\n").encode())
    broken = {
        "WordPiece": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": {c: i for i, c in enumerate(letters)}},
        "WordLevel": {"type": "WordLevel", "unk_token": "<unk>", "vocab": {c: i for i, c in enumerate(letters)}},
        "BPE": {"type": "BPE", "unk_token": "<unk>", "vocab": {c: i for i, c in enumerate(letters)}, "merges": []},
        "Unigram": {"type": "Unigram", "unk_id": None, "vocab": [[c, -1.0] for c in letters]},
    }  # fmt: skip
    for model in broken.values():
        with pytest.raises(TokenizerLoadError, match="cannot encode a character outside its vocabulary"):
            load_upload("tokenizer.json", json.dumps(_bare_doc(model)).encode())
    # with the unknown token in the vocabulary, or a BPE model with none (it drops what it cannot encode), each loads
    fixed = {**broken["WordPiece"], "vocab": {**broken["WordPiece"]["vocab"], "[UNK]": 26}}
    assert load_upload("tokenizer.json", json.dumps(_bare_doc(fixed)).encode()).tokenizer.encode(
        "é"
    ).tokens == ["[UNK]"]
    fixed = {**broken["Unigram"], "vocab": [["<unk>", 0.0], *broken["Unigram"]["vocab"]], "unk_id": 0}
    assert load_upload("tokenizer.json", json.dumps(_bare_doc(fixed)).encode()).tokenizer.encode("é").ids == [
        0
    ]
    no_unk = {**broken["BPE"], "unk_token": None}
    assert load_upload("tokenizer.json", json.dumps(_bare_doc(no_unk)).encode()).tokenizer.encode(
        "aé"
    ).tokens == ["a"]


def test_added_tokens_of_the_wrong_type_are_refused():
    """`added_tokens` must be a list; a number there ended in a TypeError in the load-time checks."""
    doc = json.loads((TOKENIZERS / "gpt2" / "tokenizer.json").read_bytes())
    for wrong in (5, "x", {"id": 1}):
        with pytest.raises(TokenizerLoadError, match="rejected this file"):
            load_upload("tokenizer.json", json.dumps({**doc, "added_tokens": wrong}).encode())


def test_corrupt_tiktoken_file():
    with pytest.raises(TokenizerLoadError, match="not a tiktoken ranks file"):
        load_upload("x.tiktoken", b"!!!notbase64 1\n")
    with pytest.raises(TokenizerLoadError, match="fewer than 256 ranks"):
        load_upload("x.tiktoken", b"YQ== 0\nYg== 1\n")
    with pytest.raises(TokenizerLoadError, match="not a tiktoken ranks file"):
        load_upload("x.tiktoken", "é 1\n".encode())


def test_oversized_upload(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKLAB_MAX_UPLOAD_BYTES", "1000")
    data = (TOKENIZERS / "gpt2" / "tokenizer.json").read_bytes()
    with pytest.raises(TokenizerLoadError, match=r"over the 1000 bytes limit.*model weights"):
        load_upload("tokenizer.json", data)
    big = tmp_path / "tokenizer.model"
    big.write_bytes(b"\0" * 5000)
    with pytest.raises(TokenizerLoadError, match=r"4.9 kB, over the 1000 bytes limit"):
        load(big)


def _zip(entries: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in entries:
            zf.writestr(info, data)
    return buf.getvalue()


GPT2_JSON = (TOKENIZERS / "gpt2" / "tokenizer.json").read_bytes()


@pytest.mark.parametrize(
    "bad", ["/etc/tokenizer.json", "../tokenizer.json", "a/../../tokenizer.json", "C:/x.json"]
)
def test_zip_with_absolute_or_parent_paths_is_refused(bad, tmp_path):
    data = _zip([("tok/tokenizer.json", GPT2_JSON), (bad, b"{}")])
    with pytest.raises(TokenizerLoadError, match="absolute or '..' path: refused"):
        load_upload("evil.zip", data)
    with pytest.raises(TokenizerLoadError):
        src.safe_extract_zip(data, tmp_path)
    assert not (tmp_path.parent / "tokenizer.json").exists()


def test_zip_symlink_entry_is_refused():
    link = zipfile.ZipInfo("tok/tokenizer.json")
    link.external_attr = (0o120777 << 16) | 0x20  # S_IFLNK
    data = _zip([(link, b"/etc/passwd")])
    with pytest.raises(TokenizerLoadError, match="symbolic link: refused"):
        load_upload("link.zip", data)


def test_zip_bomb_limit(monkeypatch):
    data = _zip([("tok/tokenizer.json", GPT2_JSON), ("tok/padding.bin", b"\0" * (8 << 20))])
    padding = zipfile.ZipFile(io.BytesIO(data)).getinfo("tok/padding.bin")
    assert padding.compress_size < 100_000  # 8 MB of zeros compress to a few kB
    monkeypatch.setenv("TOKLAB_MAX_UNZIPPED_MB", "4")
    with pytest.raises(TokenizerLoadError, match="zip expands to more than 4 MB: refused"):
        load_upload("bomb.zip", data)


def test_zip_not_a_zip_or_without_tokenizer():
    with pytest.raises(TokenizerLoadError, match="not a valid zip"):
        load_upload("x.zip", b"PK\x03\x04 this is not really a zip")
    with pytest.raises(TokenizerLoadError, match="holds no tokenizer files"):
        load_upload("x.zip", _zip([("docs/README.md", b"hello")]))


@pytest.mark.parametrize("filename", ["vocab.json", "special_tokens_map.json", "tokenizer_config.json"])
def test_partial_json_files_explain_what_to_upload(filename):
    folder = "gpt2"
    with pytest.raises(TokenizerLoadError, match=f"{filename} alone does not define a tokenizer.*folder"):
        load_upload(filename, (TOKENIZERS / folder / filename).read_bytes())


def test_vocab_txt_upload_is_wordpiece():
    up = load_upload("vocab.txt", (TOKENIZERS / "bert-base-uncased" / "vocab.txt").read_bytes())
    ref = load_shared("bert-base-uncased")
    assert up.model_type == "WordPiece" and up.vocab == ref.vocab
    assert up.normalizer["lowercase"] is True  # an uncased vocabulary: lower-casing guessed from its entries
    lines = _flores(10, LANGS[:6])
    assert not _mismatches(up.tokenizer, ref.tokenizer, lines, specials=True)


def test_partial_json_given_as_a_path():
    with pytest.raises(TokenizerLoadError, match="vocab.json alone does not define a tokenizer"):
        load(TOKENIZERS / "gpt2" / "vocab.json")


def test_zip_with_too_many_entries(monkeypatch):
    monkeypatch.setattr(src, "MAX_ZIP_ENTRIES", 10)
    data = _zip([("tok/tokenizer.json", GPT2_JSON)] + [(f"tok/f{i}.txt", b"x") for i in range(20)])
    with pytest.raises(TokenizerLoadError, match="21 entries, more than the 10"):
        load_upload("many.zip", data)
