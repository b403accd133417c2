"""Tokenizer files that are not a `tokenizer.json`, converted to one (a document for
:meth:`~analysis.tokenizer.tokenizer.LoadedTokenizer.from_document`): a SentencePiece `.model`, a tiktoken ranks file
(byte-level BPE with a split regex: :data:`TIKTOKEN_PATTERNS`), GPT-2 style `vocab.json` + `merges.txt` and a
WordPiece `vocab.txt`."""

from __future__ import annotations

import base64
import re

from analysis.core.inputs import decode_utf8, parse_json
from analysis.errors import TokenizerLoadError

from .alphabets import BYTE_TO_CHAR, SPIECE_UNDERLINE
from .document import added_token_entry, bpe_model

#: Split regexes of the common tiktoken encodings (used when converting a ranks file).
TIKTOKEN_PATTERNS: dict[str, str] = {
    "cl100k_base / Llama-3": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
    "Qwen (qwen.tiktoken)": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
    "o200k_base": (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
    "r50k / GPT-2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}


def guess_tiktoken_pattern(n_ranks: int) -> str:
    """Pick a split regex name for a ranks file from its size (the UI lets the user override it)."""
    if n_ranks >= 190_000:
        return "o200k_base"
    if 150_000 <= n_ranks < 152_000:
        return "Qwen (qwen.tiktoken)"
    if n_ranks <= 60_000:
        return "r50k / GPT-2"
    return "cl100k_base / Llama-3"


def looks_like_sentencepiece(data: bytes) -> bool:
    """Whether `data` starts like a serialised SentencePiece model (a protobuf, not text)."""
    return data[:1] == b"\n" and b"\x00" in data[:4096] and not data[:1].isalpha()


def looks_like_tiktoken(data: bytes) -> bool:
    """Whether the first lines of `data` are tiktoken ranks (`<base64 token> <rank>`)."""
    head = [line.strip() for line in data[:2000].split(b"\n")[:5] if line.strip()]
    return bool(head) and all(re.fullmatch(rb"[A-Za-z0-9+/=]+ \d+", line) for line in head)


def sentencepiece_to_document(model_bytes: bytes) -> dict:
    """Convert a SentencePiece model (BPE or Unigram) to a tokenizer.json document.

    Both: SentencePiece's normalizer (precompiled character map, extra-whitespace removal, dummy `▁`
    prefix, spaces → `▁`) and no pre-tokenizer, so ids equal `SentencePieceProcessor.encode`.
    BPE: merges are every split of each piece into two pieces of the vocabulary, ordered by the merged
    piece's score (SentencePiece applies the highest-scoring merge first); a BOS post-processor as in
    Llama's tokenizer.json when the model defines a BOS piece. Unigram: pieces with their scores.
    """
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb  # noqa: PLC0415 - heavy, loaded on use
    except ImportError as e:  # pragma: no cover
        raise TokenizerLoadError("the sentencepiece package is needed to read .model files") from e
    m = pb.ModelProto()
    try:
        m.ParseFromString(model_bytes)
    except Exception as e:  # protobuf DecodeError
        raise TokenizerLoadError(f"not a SentencePiece model ({e})") from e
    if not m.pieces:
        raise TokenizerLoadError("not a SentencePiece model (no pieces)")
    NORMAL, UNKNOWN, CONTROL, USER, _UNUSED, BYTE = 1, 2, 3, 4, 5, 6
    model_type = m.trainer_spec.model_type  # 1 unigram, 2 bpe, 3 word, 4 char
    pieces = [(p.piece, p.score, p.type) for p in m.pieces]
    bad = next((i for i, (p, _, _) in enumerate(pieces) if not isinstance(p, str)), None)
    if bad is not None:  # protobuf hands a proto2 string field that is not UTF-8 back as bytes
        raise TokenizerLoadError(
            f"not a valid SentencePiece model (piece #{bad} is not UTF-8 text: {pieces[bad][0][:40]!r})"
        )
    byte_fallback = any(t == BYTE for _, _, t in pieces) or bool(m.trainer_spec.byte_fallback)
    unk_id = next((i for i, (_, _, t) in enumerate(pieces) if t == UNKNOWN), None)
    unk = pieces[unk_id][0] if unk_id is not None else None
    add_prefix = (
        m.normalizer_spec.add_dummy_prefix if m.normalizer_spec.HasField("add_dummy_prefix") else True
    )
    charsmap = bytes(m.normalizer_spec.precompiled_charsmap)

    # normalizer: SentencePiece's own order — character map, whitespace clean-up, dummy prefix, ' ' → '▁'
    norms: list[dict] = []
    if charsmap:
        norms.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()})
    if m.normalizer_spec.remove_extra_whitespaces:  # proto default True; only U+0020 counts as whitespace
        norms.append({"type": "Replace", "pattern": {"Regex": r"\A +| +\z"}, "content": ""})
        norms.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    if add_prefix:
        norms.append({"type": "Prepend", "prepend": SPIECE_UNDERLINE})
    norms.append({"type": "Replace", "pattern": {"String": " "}, "content": SPIECE_UNDERLINE})
    added = []
    for i, (piece, _, t) in enumerate(pieces):
        if t in (UNKNOWN, CONTROL, USER):
            added.append(added_token_entry(i, piece, special=t != USER, normalized=t == USER))
    decoders: list[dict] = [
        {"type": "Replace", "pattern": {"String": SPIECE_UNDERLINE}, "content": " "},
    ]
    if byte_fallback:
        decoders.append({"type": "ByteFallback"})
    decoders.append({"type": "Fuse"})
    if add_prefix:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})

    if model_type == 2:  # BPE
        vocab = {p: i for i, (p, _, _) in enumerate(pieces)}
        scored = [(p, s) for p, s, t in pieces if t in (NORMAL, USER)]
        merges = _sentencepiece_merges(vocab, scored)
        model = {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": byte_fallback,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [list(x) for x in merges],
        }
        pre = None
    elif model_type == 1:  # Unigram
        model = {
            "type": "Unigram",
            "unk_id": unk_id,
            "vocab": [[p, float(s)] for p, s, _ in pieces],
            "byte_fallback": byte_fallback,
        }
        # no pre-tokenizer: SentencePiece runs Viterbi over the whole normalized sentence (pieces never
        # hold an inner '▁', so this equals splitting at each '▁'); a Metaspace pre-tokenizer would not
        # add the dummy prefix before a leading space as SentencePiece does
        pre = None
    else:
        raise TokenizerLoadError(
            "this SentencePiece model is of the WORD or CHAR type, which fast tokenizers do not support"
        )
    post = None
    bos_id = m.trainer_spec.bos_id
    if model_type == 2 and 0 <= bos_id < len(pieces) and pieces[bos_id][2] == CONTROL:
        bos = pieces[bos_id][0]
        post = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": bos, "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
        }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": norms} if norms else None,
        "pre_tokenizer": pre,
        "post_processor": post,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": model,
    }


def _sentencepiece_merges(vocab: dict[str, int], scored: list[tuple[str, float]]) -> list[tuple[str, str]]:
    """Every (left, right) split of each piece into two vocabulary pieces, best-scored piece first."""
    cands: list[tuple[float, int, int, int, str, str]] = []
    for piece, score in scored:
        pid = vocab[piece]
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                cands.append((-score, pid, vocab[left], vocab[right], left, right))
    cands.sort()
    return [(left, right) for *_, left, right in cands]


def tiktoken_to_document(
    data: bytes,
    *,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
    merges: str = "all",
) -> dict:
    """Convert a tiktoken ranks file (`base64 rank` lines) to a byte-level BPE tokenizer.json document.

    tiktoken merges, at each step, the adjacent pair whose concatenation has the lowest rank. With
    `merges="all"` (the default) every split of a token into two vocabulary tokens becomes a merge,
    ranked by the token's own rank: HF BPE then makes exactly tiktoken's choices. `merges="canonical"`
    keeps one merge per token (the last one tiktoken's own merging of its bytes makes), the smaller
    list some published ports use (Qwen's tokenizer.json). `ignore_merges` is on because tiktoken
    returns a whole pre-token that is in the vocabulary without merging.
    """
    if merges not in ("all", "canonical"):
        raise ValueError(f"merges must be 'all' or 'canonical', not {merges!r}")
    ranks: dict[bytes, int] = {}
    lineno = 0
    try:
        for lineno, line in enumerate(data.decode("ascii").splitlines(), 1):  # noqa: B007
            line = line.strip()
            if not line:
                continue
            b64, _, r = line.partition(" ")
            ranks[base64.b64decode(b64, validate=True)] = int(r)
    except (UnicodeDecodeError, ValueError) as e:
        raise TokenizerLoadError(f"not a tiktoken ranks file (line {lineno}: {e})") from e
    if len(ranks) < 256:
        raise TokenizerLoadError("not a tiktoken ranks file: fewer than 256 ranks")
    pat_name = pattern if pattern in TIKTOKEN_PATTERNS else None
    regex = (
        TIKTOKEN_PATTERNS[pat_name or guess_tiktoken_pattern(len(ranks))]
        if not pattern or pat_name
        else pattern
    )

    strs = {b: b.decode("latin-1").translate(_LATIN1_TO_BYTE_LEVEL) for b in ranks}
    vocab = {strs[b]: r for b, r in ranks.items()}
    merge_list: list[tuple[int, int, int, str, str]] = []
    for tok, rank in ranks.items():
        if len(tok) < 2:
            continue
        if merges == "all":
            for k in range(1, len(tok)):
                left, right = tok[:k], tok[k:]
                rl, rr = ranks.get(left), ranks.get(right)
                if rl is not None and rr is not None:
                    merge_list.append((rank, rl, rr, strs[left], strs[right]))
        else:
            parts = _bpe_parts(ranks, tok, max_rank=rank)
            if len(parts) != 2:
                continue  # unreachable in tiktoken as well; no merge produces it
            merge_list.append((rank, ranks[parts[0]], ranks[parts[1]], strs[parts[0]], strs[parts[1]]))
    merge_list.sort()
    added = [added_token_entry(i, c) for c, i in sorted((special_tokens or {}).items(), key=lambda kv: kv[1])]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": bpe_model(vocab, [[a, b] for *_, a, b in merge_list], ignore_merges=True),
    }


#: latin-1 character of each byte value → GPT-2's printable byte-level character (for str.translate)
_LATIN1_TO_BYTE_LEVEL = {b: c for b, c in BYTE_TO_CHAR.items()}


def _bpe_parts(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """tiktoken's byte-pair merging of `token`, applying only merges whose result ranks below `max_rank`."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while True:
        best, best_i = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best):
                best, best_i = r, i
        if best is None:
            return parts
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]


def gpt2_files_to_document(vocab_json: bytes, merges_txt: bytes) -> dict:
    """Build a GPT-2-style byte-level BPE document from slow-tokenizer `vocab.json` and `merges.txt`."""
    vocab = parse_json(vocab_json, "vocab.json", TokenizerLoadError)
    if not isinstance(vocab, dict):
        raise TokenizerLoadError("vocab.json must map each token to its id")
    merges = []
    for line in decode_utf8(merges_txt, "merges.txt", TokenizerLoadError).splitlines():
        if not line or line.startswith("#version"):
            continue
        a, sep, b = line.partition(" ")
        if sep:
            merges.append([a, b])
    specials = [t for t in ("<|endoftext|>",) if t in vocab]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added_token_entry(vocab[t], t, normalized=True) for t in specials],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "post_processor": {
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": False,
            "use_regex": True,
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


def wordpiece_vocab_to_document(vocab_txt: bytes, *, lowercase: bool = True) -> dict:
    """Build a BERT-style WordPiece document from a slow-tokenizer `vocab.txt`."""
    vocab = {}
    for line in decode_utf8(vocab_txt, "vocab.txt", TokenizerLoadError).splitlines():
        tok = line.rstrip("\n")
        if tok and tok not in vocab:
            vocab[tok] = len(vocab)
    if not vocab:
        raise TokenizerLoadError("vocab.txt is empty: a WordPiece vocabulary lists one token per line")
    specials = [t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t in vocab]
    pp = None
    if "[CLS]" in vocab and "[SEP]" in vocab:
        pp = {"type": "BertProcessing", "sep": ["[SEP]", vocab["[SEP]"]], "cls": ["[CLS]", vocab["[CLS]"]]}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added_token_entry(vocab[t], t) for t in specials],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": lowercase,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": pp,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": vocab,
        },
    }
