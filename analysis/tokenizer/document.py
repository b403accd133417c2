"""A `tokenizer.json` document before it becomes a :class:`~analysis.tokenizer.tokenizer.LoadedTokenizer`: the
checks it must pass (:func:`check_document`: a known model type, ids without duplicates or huge gaps, merges whose
parts and results are in the vocabulary, a tokenizer that encodes unseen text), the parts of it every editor
builds (:func:`bpe_model`, :func:`added_token_entry`, :func:`parse_merges`) and a readable description of its
pipeline components (:func:`describe_component`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import tokenizers

from analysis.errors import TokenizerLoadError, is_rust_panic

MODEL_TYPES = ("BPE", "WordPiece", "Unigram", "WordLevel")
#: Ids may leave gaps (padding rows, removed tokens), but the largest id must stay below
#: 2 × (number of ids) + MAX_ID_SLACK: every table indexed by id is then at most a few times the vocabulary.
MAX_ID_SLACK = 65_536


#: The Rust tokenizers this process keeps for views of the same tokenizer.json bytes, up to this many bytes of JSON
def bpe_model(
    vocab: dict[str, int] | None = None,
    merges: list[Any] | None = None,
    *,
    ignore_merges: bool = False,
    byte_fallback: bool = False,
    unk_token: str | None = None,
) -> dict[str, Any]:
    """A tokenizer.json BPE `model` section with every flag spelled out (no dropout, prefix or suffix)."""
    return {
        "type": "BPE",
        "dropout": None,
        "unk_token": unk_token,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": byte_fallback,
        "ignore_merges": ignore_merges,
        "vocab": vocab if vocab is not None else {},
        "merges": merges if merges is not None else [],
    }


def parse_merges(raw: list[Any]) -> list[tuple[str, str]]:
    """Parse merges in either serialisation: `"a b"` strings (split on the first space) or `["a", "b"]` lists."""
    out: list[tuple[str, str]] = []
    for i, m in enumerate(raw):
        if isinstance(m, str):
            left, sep, right = m.partition(" ")
            if not sep:
                raise TokenizerLoadError(f"merge #{i} {m!r} has no space separating its two parts")
            out.append((left, right))
        elif isinstance(m, (list, tuple)) and len(m) == 2 and all(isinstance(x, str) for x in m):
            out.append((m[0], m[1]))
        else:
            raise TokenizerLoadError(f"merge #{i} has an unsupported form: {m!r}")
    return out


def _model_type(model: dict) -> str | None:
    t = model.get("type")
    if t is None and "merges" in model:
        return "BPE"
    return t


def _duplicate_id(vocab: dict[str, int]) -> str:
    seen: dict[int, str] = {}
    for tok, i in vocab.items():
        if i in seen:
            return f"tokens {seen[i]!r} and {tok!r} share id {i}"
        seen[i] = tok
    return ""


#: Characters no vocabulary is expected to hold all of: a private-use character, a rare CJK ideograph, an emoji
UNSEEN_PROBE = "a \ue000\U0002a6d6\U0001f600 z"


def check_encodes_unseen(tok: tokenizers.Tokenizer, name: str) -> None:
    """Refuse a tokenizer that raises on a character outside its vocabulary instead of encoding it.

    The tokenizers library raises then when the model names an unknown token that is not in its vocabulary
    (WordPiece, WordLevel, BPE without byte fallback) or a Unigram model has no `unk_id`: loaded as it is, the first
    unseen character of a FLORES line or a corpus would end a measurement.
    """
    try:
        tok.encode(UNSEEN_PROBE, add_special_tokens=False)
    except BaseException as e:
        if not isinstance(e, Exception) and not is_rust_panic(e):
            raise
        raise TokenizerLoadError(
            f"{name}: this tokenizer cannot encode a character outside its vocabulary (the tokenizers library: "
            f"{e}): its unknown token is missing from the vocabulary and it has no byte fallback, so measuring "
            "real text would fail at the first unseen character"
        ) from None


def check_document(doc: Any, name: str) -> None:
    """Refuse a tokenizer.json document before the Rust library builds it, when it would crash or exhaust us.

    * no `model` section; an empty vocabulary (every measure of it would be 0 or undefined);
    * a negative id, two model tokens with one id, or ids so sparse that a table indexed by id would dwarf the
      vocabulary (largest id ≥ 2 × ids + :data:`MAX_ID_SLACK`): one token with id 2,000,000,000 is refused at
      load instead of costing gigabytes later;
    * a BPE merge whose parts or result are not in the vocabulary (the tokenizers library panics on some of
      these, with a Rust backtrace, instead of raising an error).
    Malformed values (a string id, a merge of three parts) are left to the library, which rejects them cleanly.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise TokenizerLoadError(f"{name}: not a tokenizer.json document (no 'model' section)")
    model = doc["model"]
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        ids = list(vocab.values())
    elif isinstance(vocab, list):
        ids = list(range(len(vocab)))
    else:
        return
    if not all(type(i) is int for i in ids):
        return
    entries = doc.get("added_tokens")
    added = {
        a["id"]
        for a in (entries if isinstance(entries, list) else [])  # any other form: the library refuses it
        if isinstance(a, dict) and type(a.get("id")) is int
    }
    model_ids = set(ids)
    if isinstance(vocab, dict) and len(model_ids) != len(ids):
        raise TokenizerLoadError(f"{name}: duplicate vocabulary ids: {_duplicate_id(vocab)}")
    all_ids = model_ids | added
    if not all_ids:
        raise TokenizerLoadError(f"{name}: the vocabulary is empty (no tokens, so nothing can be measured)")
    lo, hi = min(all_ids), max(all_ids)
    if lo < 0:
        raise TokenizerLoadError(f"{name}: token ids must not be negative (found {lo})")
    if hi >= 2 * len(all_ids) + MAX_ID_SLACK:
        raise TokenizerLoadError(
            f"{name}: token ids are not dense: the largest id is {hi:,} but there are only {len(all_ids):,} "
            f"tokens (ids must stay below 2 × tokens + {MAX_ID_SLACK:,}); is the vocabulary corrupt?"
        )
    if _model_type(model) == "BPE" and isinstance(vocab, dict):
        _check_merges(model, vocab, name)


def _check_merges(model: dict, vocab: dict[str, int], name: str) -> None:
    """Check that every merge's result is in the vocabulary (the library panics when it is not; it reports
    missing parts and malformed merges itself)."""
    raw = model.get("merges") or []
    if not isinstance(raw, list) or not raw:
        return
    prefix = model.get("continuing_subword_prefix") or ""
    cut = len(prefix.encode("utf-8")) if isinstance(prefix, str) else 0
    if not cut:  # fast path: every merged string ("a b" → "ab", ["a", "b"] → "ab") is in the vocabulary
        try:
            if all(type(m) is str for m in raw):
                made = {m.replace(" ", "", 1) for m in raw}
            else:
                made = {a + b for a, b in raw}
            if made <= vocab.keys():
                return
        except (TypeError, ValueError):  # a malformed merge: the full check below names it
            pass
    try:
        merges = parse_merges(raw)
    except TokenizerLoadError as e:
        raise TokenizerLoadError(f"{name}: {e}") from None
    for i, (a, b) in enumerate(merges):
        if a not in vocab or b not in vocab:
            continue  # reported by the library
        merged = _merged_with_prefix(a, b, cut) if cut else a + b
        if merged is None or merged not in vocab:
            raise TokenizerLoadError(
                f"{name}: merge #{i} ({a!r}, {b!r}) makes {merged!r}, which is not in the vocabulary"
            )


def _merged_with_prefix(a: str, b: str, cut: int) -> str | None:
    """What the tokenizers library makes of a merge when a continuing-subword prefix of `cut` bytes is set."""
    tail = b.encode("utf-8")
    if len(tail) < cut:
        return None
    try:
        return a + tail[cut:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def walk_components(node: Any) -> Iterator[dict]:
    """Yield a normalizer/pre-tokenizer/decoder node and, for Sequences, every nested component."""
    if not isinstance(node, dict):
        return
    yield node
    for key in ("normalizers", "pretokenizers", "decoders", "processors"):
        for child in node.get(key) or []:
            yield from walk_components(child)


def describe_component(node: Any) -> list[str]:
    """A flat, human-readable list of a pipeline component (e.g. `["NFC", "Split(regex)", "ByteLevel"]`)."""
    if not isinstance(node, dict):
        return []
    out = []
    for c in walk_components(node):
        t = c.get("type", "?")
        if t == "Sequence":
            continue
        extra = ""
        if t == "Split":
            pat = c.get("pattern", {})
            extra = f"({'regex' if 'Regex' in pat else 'string'}, {c.get('behavior', '')})"
        elif t == "Replace":
            pat = c.get("pattern", {})
            extra = f"({pat.get('String', pat.get('Regex', ''))!r} → {c.get('content', '')!r})"
        elif t == "Prepend":
            extra = f"({c.get('prepend', '')!r})"
        elif t == "ByteLevel":
            extra = f"(add_prefix_space={c.get('add_prefix_space')}, use_regex={c.get('use_regex', True)})"
        elif t == "Metaspace":
            extra = f"(replacement={c.get('replacement')!r}, prepend_scheme={c.get('prepend_scheme')})"
        elif t == "Digits":
            extra = f"(individual_digits={c.get('individual_digits')})"
        out.append(t + extra)
    return out


def added_token_entry(
    token_id: int, content: str, *, special: bool = True, normalized: bool = False
) -> dict[str, Any]:
    """One `added_tokens` entry of tokenizer.json (no lstrip/rstrip/single_word)."""
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": normalized,
        "special": special,
    }


@dataclass(frozen=True)
class AddedToken:
    """An entry of `added_tokens` in tokenizer.json."""

    id: int
    content: str
    special: bool
    normalized: bool = False
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False
