"""The loaded-tokenizer view: one immutable `tokenizer.json` document and everything read from it.

Why one file (about 600 lines): LoadedTokenizer is the one read-only view every module takes; its readable
forms, byte tables and merge parsing are what makes it that view.

`LoadedTokenizer` is what every other module takes. It never mutates its document: edits (extension,
pruning) call :meth:`LoadedTokenizer.document` to get a deep copy, change it and build a new object with
:meth:`LoadedTokenizer.from_document`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import tokenizers

from analysis.core.cache import SingleFlight
from analysis.core.inputs import parse_json
from analysis.errors import TokenizerLoadError, is_rust_panic

MODEL_TYPES = ("BPE", "WordPiece", "Unigram", "WordLevel")
#: Ids may leave gaps (padding rows, removed tokens), but the largest id must stay below
#: 2 × (number of ids) + MAX_ID_SLACK: every table indexed by id is then at most a few times the vocabulary.
MAX_ID_SLACK = 65_536
#: The Rust tokenizers this process keeps for views of the same tokenizer.json bytes, up to this many bytes of JSON
#: in all (about 3–9× that in memory) and :data:`SHARED_MAX_COUNT` tokenizers; the least recently used go first.
SHARED_MAX_BYTES = 32 << 20
SHARED_MAX_COUNT = 6
#: How many digests of documents that passed :func:`check_document` this process remembers.
CHECKED_MAX = 4096


# --------------------------------------------------------------------------------------------------
# Byte-level alphabet (GPT-2's printable mapping of the 256 byte values)
# --------------------------------------------------------------------------------------------------
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR: dict[int, str] = bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}
#: byte-level characters → the byte they stand for as a latin-1 character (`str.translate` maps a whole token in C)
BYTE_LEVEL_TABLE = str.maketrans({c: chr(b) for c, b in CHAR_TO_BYTE.items()})
#: the byte-level alphabet: a token is byte-level text when all its characters are in it
BYTE_LEVEL_ALPHABET = frozenset(CHAR_TO_BYTE)
SPIECE_UNDERLINE = "\u2581"


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


def _check_encodes_unseen(tok: tokenizers.Tokenizer, name: str) -> None:
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


def _walk_components(node: Any) -> Iterator[dict]:
    """Yield a normalizer/pre-tokenizer/decoder node and, for Sequences, every nested component."""
    if not isinstance(node, dict):
        return
    yield node
    for key in ("normalizers", "pretokenizers", "decoders", "processors"):
        for child in node.get(key) or []:
            yield from _walk_components(child)


def describe_component(node: Any) -> list[str]:
    """A flat, human-readable list of a pipeline component (e.g. `["NFC", "Split(regex)", "ByteLevel"]`)."""
    if not isinstance(node, dict):
        return []
    out = []
    for c in _walk_components(node):
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


def format_bytes(bs: bytes) -> str:
    """Show raw bytes that are not valid UTF-8 on their own, e.g. `⟨E2 80⟩`."""
    return "⟨" + " ".join(f"{b:02X}" for b in bs) + "⟩"


def readable_from_bytes(bs: bytes) -> str:
    """Decode valid UTF-8 runs and show every stray byte run as `⟨NN …⟩`; never produce U+FFFD."""
    try:
        return bs.decode("utf-8")  # fast path: the whole token is valid UTF-8
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    i = 0
    bad = bytearray()
    while i < len(bs):
        # find the longest valid UTF-8 character starting at i
        for width in (1, 2, 3, 4):
            chunk = bs[i : i + width]
            try:
                ch = chunk.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(ch) == 1:
                if bad:
                    out.append(format_bytes(bytes(bad)))
                    bad.clear()
                out.append(ch)
                i += width
                break
        else:
            bad.append(bs[i])
            i += 1
    if bad:
        out.append(format_bytes(bytes(bad)))
    return "".join(out)


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


@dataclass(frozen=True)
class TokenizerSummary:
    """The Inspect result of one tokenizer: what `python -m analysis inspect` prints and the Load & inspect page
    shows in its summary card and offers as JSON (:meth:`to_json`, one schema for both)."""

    name: str
    source: str
    model_type: str
    flavour: str
    #: tokens including the added ones
    vocab_size: int
    model_vocab_size: int
    merges: int
    added_tokens: int
    special_tokens: list[str]
    ignore_merges: bool
    byte_fallback: bool
    dropout: float | None
    continuing_subword_prefix: str | None
    end_of_word_suffix: str | None
    unk_token: str | None
    #: the pipeline components, each a flat readable list (:func:`describe_component`)
    normalizer: list[str]
    pre_tokenizer: list[str]
    post_processor: list[str]
    decoder: list[str]
    content_hash: str

    def to_json(self) -> dict[str, Any]:
        """The JSON document (keys in the order the text output prints them)."""
        return asdict(self)


class _Shared:
    """Work done once per process for one tokenizer.json text, by the SHA-256 of its bytes: the Rust tokenizer
    (shared by every view of those bytes; it is never mutated, :meth:`LoadedTokenizer.fresh_tokenizer` makes
    private copies) and the fact that the document passed :func:`check_document`. Loading the same file again (a
    second test, a second session's upload, a reload after an export) then costs a hash instead of parsing,
    checking and building: 1.0 s → a few ms for Llama-3.1's 9 MB tokenizer.json on two cores."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flight = SingleFlight()  # two views of the same new bytes at once build it once
        self._built: OrderedDict[str, tuple[int, tokenizers.Tokenizer]] = OrderedDict()
        self._checked: OrderedDict[str, None] = OrderedDict()
        #: read-only views computed from a kept tokenizer (its vocabulary, added tokens, id → token), by digest
        self._views: dict[str, dict[str, Any]] = {}

    def tokenizer(
        self, digest: str, size: int, build: Callable[[], tokenizers.Tokenizer]
    ) -> tokenizers.Tokenizer:
        """The Rust tokenizer built for these bytes in this process, or `build()`'s, kept for the next view."""
        with self._lock:
            got = self._built.get(digest)
            if got is not None:
                self._built.move_to_end(digest)
                return got[1]
        # outside the lock (building takes up to seconds); a twin arriving meanwhile (the server's warm-up and a
        # first visitor, two sessions opening one upload) waits for this build instead of building it again
        return self._flight.run(digest, lambda: self._build_and_keep(digest, size, build))

    def _build_and_keep(
        self, digest: str, size: int, build: Callable[[], tokenizers.Tokenizer]
    ) -> tokenizers.Tokenizer:
        with self._lock:
            got = self._built.get(digest)  # kept by a flight that ended between our look and ours starting
            if got is not None:
                return got[1]
        tok = build()
        if size <= SHARED_MAX_BYTES:
            with self._lock:
                self._built[digest] = (size, tok)
                self._built.move_to_end(digest)
                total = sum(n for n, _ in self._built.values())
                while len(self._built) > SHARED_MAX_COUNT or total > SHARED_MAX_BYTES:
                    gone, (n, _) = self._built.popitem(last=False)
                    self._views.pop(gone, None)
                    total -= n
        return tok

    def view(self, digest: str, name: str, build: Callable[[], Any]) -> Any:
        """A read-only view of a kept tokenizer (`name`: vocab, added tokens, …), computed once while the tokenizer
        is kept; `build()`'s value, not kept, for one that is not."""
        with self._lock:
            views = self._views.get(digest) if digest in self._built else None
            if views is not None and name in views:
                return views[name]
        value = build()
        with self._lock:
            if digest in self._built:
                self._views.setdefault(digest, {})[name] = value
        return value

    def was_checked(self, digest: str) -> bool:
        """Whether a document with these bytes passed :func:`check_document` in this process."""
        with self._lock:
            return digest in self._checked

    def mark_checked(self, digest: str) -> None:
        """Remember that a document with these bytes passed :func:`check_document`."""
        with self._lock:
            self._checked[digest] = None
            while len(self._checked) > CHECKED_MAX:
                self._checked.popitem(last=False)


_SHARED = _Shared()


def clear_shared() -> None:
    """Forget the Rust tokenizers and document checks this process shares between views of the same bytes (the
    next load of any file builds and checks it again; for benchmarks of a first load)."""
    global _SHARED
    _SHARED = _Shared()


class LoadedTokenizer:
    """An immutable view of one tokenizer: its `tokenizer.json` document plus derived facts.

    Build with :func:`analysis.tokenizer.sources.load` (any source), :meth:`from_document` or :meth:`from_json_text`.
    The Rust tokenizer is built straight from the JSON text; the Python document is parsed lazily, so
    loading costs little more than `tokenizers.Tokenizer.from_str`.
    """

    def __init__(
        self, raw: bytes, name: str, source: str = "", config: dict | None = None, doc: dict | None = None
    ) -> None:
        self._raw = raw
        self.name = name
        self.source = source
        self.config = dict(config or {})
        if doc is not None:
            self.__dict__["_doc"] = doc

    def __repr__(self) -> str:
        return f"LoadedTokenizer(name={self.name!r}, source={self.source!r})"

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_document(
        cls, doc: dict, name: str, source: str = "", config: dict | None = None
    ) -> LoadedTokenizer:
        """Build a view from a tokenizer.json document (validated by the Rust library)."""
        check_document(doc, name)
        raw = json.dumps(doc, ensure_ascii=False).encode("utf-8")
        obj = cls(raw, name=name, source=source, config=config, doc=doc)
        _ = obj.tokenizer  # validate eagerly: a bad document fails here, with a clear message
        _SHARED.mark_checked(obj.digest)
        return obj

    @classmethod
    def from_json_text(
        cls,
        text: str | bytes,
        name: str,
        source: str = "",
        config: dict | None = None,
        *,
        checked: bool = False,
    ) -> LoadedTokenizer:
        """Build a view from tokenizer.json text (clear error on corrupt JSON or a rejected document).

        `checked`: the text is one this engine wrote itself after :func:`check_document` passed (e.g. its own disk
        cache of the converted default tokenizer); the document is then parsed lazily and not checked again, which
        saves most of a fresh server's first view. Never for text a user supplied."""
        raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
            raw = raw[3:]
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TokenizerLoadError(
                f"{name}: tokenizer.json is not UTF-8 text (bad byte at offset {e.start})"
            ) from None
        obj = cls(raw, name=name, source=source, config=config)
        if checked or _SHARED.was_checked(obj.digest):  # the same bytes passed the check in this process
            _ = obj.tokenizer
            return obj
        doc = parse_json(raw, f"{name}: tokenizer.json", TokenizerLoadError)
        check_document(doc, name)
        obj.__dict__["_doc"] = doc
        _ = obj.tokenizer
        _SHARED.mark_checked(obj.digest)
        return obj

    def with_source(self, name: str | None = None, source: str | None = None) -> LoadedTokenizer:
        """The same tokenizer under another name or source label (shares the JSON bytes)."""
        return LoadedTokenizer(
            self._raw,
            name=name or self.name,
            source=self.source if source is None else source,
            config=self.config,
            doc=self.__dict__.get("_doc"),
        )

    @cached_property
    def _doc(self) -> dict:
        return json.loads(self._raw)

    def document(self) -> dict:
        """A deep copy of the tokenizer.json document, safe to edit."""
        return copy.deepcopy(self._doc)

    def to_json(self) -> str:
        """The tokenizer.json text."""
        return self._raw.decode("utf-8")

    # ---------------------------------------------------------------- Rust objects
    @cached_property
    def tokenizer(self) -> tokenizers.Tokenizer:
        """The fast tokenizer, with padding and truncation switched off (never mutate it: every view of the same
        tokenizer.json bytes in this process shares it)."""
        return _SHARED.tokenizer(self.digest, len(self._raw), self.fresh_tokenizer)

    def merges_only_tokenizer(self) -> tokenizers.Tokenizer:
        """A fast tokenizer in the setting of :meth:`fresh_tokenizer`'s `merges_only` (a BPE model with
        `ignore_merges` off and no dropout), for read-only use: the shared :attr:`tokenizer` when it is already
        in that setting, else a private copy."""
        if self.model_type == "BPE" and (self.ignore_merges or self.dropout):
            return self.fresh_tokenizer(merges_only=True)
        return self.tokenizer

    def fresh_tokenizer(self, *, merges_only: bool = False) -> tokenizers.Tokenizer:
        """A new, private fast tokenizer (for callers that must change runtime flags).

        With `merges_only`, a BPE model gets `ignore_merges` off and no dropout: the setting of the
        Self-Tokenization Test, merge trees and frequency counting.
        """
        try:
            text = self._raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TokenizerLoadError(f"{self.name}: tokenizer.json is not UTF-8 text ({e})") from e
        try:
            tok = tokenizers.Tokenizer.from_str(text)
        except BaseException as e:  # the Rust side raises plain Exception subclasses, or panics
            if not isinstance(e, Exception) and not is_rust_panic(e):
                raise
            doc = parse_json(text, f"{self.name}: tokenizer.json", TokenizerLoadError)
            if not isinstance(doc, dict) or "model" not in doc:
                raise TokenizerLoadError(
                    f"{self.name}: not a tokenizer.json document (no 'model' section)"
                ) from e
            raise TokenizerLoadError(f"{self.name}: the tokenizers library rejected this file: {e}") from e
        tok.no_padding()
        tok.no_truncation()
        _check_encodes_unseen(tok, self.name)
        if merges_only and self.model_type == "BPE":
            if self.ignore_merges:
                tok.model.ignore_merges = False
            if self.dropout:
                tok.model.dropout = None
        return tok

    @cached_property
    def digest(self) -> str:
        """The SHA-256 of the tokenizer.json bytes, in full (hex)."""
        return hashlib.sha256(self._raw).hexdigest()

    @cached_property
    def content_hash(self) -> str:
        """The first 16 hex digits of :attr:`digest`: the cache key for everything computed from it."""
        return self.digest[:16]

    # ---------------------------------------------------------------- model section
    @property
    def model(self) -> dict:
        """The raw `model` section (read-only by convention)."""
        return self._doc["model"]

    @property
    def model_type(self) -> str:
        """BPE, WordPiece, Unigram or WordLevel."""
        t = self.model.get("type")
        if t is None:  # very old files omit the type; infer it
            if "merges" in self.model:
                return "BPE"
            if isinstance(self.model.get("vocab"), list):
                return "Unigram"
            return "WordPiece" if "max_input_chars_per_word" in self.model else "WordLevel"
        return t

    @cached_property
    def vocab(self) -> dict[str, int]:
        """The model vocabulary, token → id (added-only tokens excluded; shared by the views of the same bytes:
        never mutate it)."""
        tok = self.tokenizer
        return _SHARED.view(self.digest, "vocab", lambda: tok.get_vocab(with_added_tokens=False))

    @cached_property
    def added_tokens(self) -> list[AddedToken]:
        """The `added_tokens` entries, with ids as the Rust library resolved them (shared: never mutate it)."""
        return _SHARED.view(self.digest, "added_tokens", self._read_added_tokens)

    def _read_added_tokens(self) -> list[AddedToken]:
        out = []
        for a in self._doc.get("added_tokens") or []:
            tid = self.tokenizer.token_to_id(a["content"])
            out.append(
                AddedToken(
                    id=a["id"] if tid is None else tid,
                    content=a["content"],
                    special=bool(a.get("special")),
                    normalized=bool(a.get("normalized")),
                    lstrip=bool(a.get("lstrip")),
                    rstrip=bool(a.get("rstrip")),
                    single_word=bool(a.get("single_word")),
                )
            )
        return out

    @cached_property
    def merges(self) -> list[tuple[str, str]]:
        """The BPE merges in rank order (empty for other models); both serialisations accepted."""
        if self.model_type != "BPE":
            return []
        return parse_merges(self.model.get("merges") or [])

    @property
    def ignore_merges(self) -> bool:
        """Whether a pre-token already in the vocabulary skips the merges (Llama-3, tiktoken ports)."""
        return bool(self.model.get("ignore_merges", False))

    @property
    def byte_fallback(self) -> bool:
        """Whether unknown characters become `<0xNN>` byte pieces (SentencePiece-style BPE)."""
        return bool(self.model.get("byte_fallback", False))

    @property
    def dropout(self) -> float | None:
        """BPE dropout probability (None = deterministic)."""
        return self.model.get("dropout")

    @property
    def continuing_subword_prefix(self) -> str | None:
        """Prefix marking non-initial subwords (`##` in WordPiece)."""
        return self.model.get("continuing_subword_prefix")

    @property
    def end_of_word_suffix(self) -> str | None:
        """Suffix marking word-final subwords (e.g. `</w>`)."""
        return self.model.get("end_of_word_suffix")

    @property
    def unk_token(self) -> str | None:
        """The model's unknown token, if any."""
        return self.model.get("unk_token")

    @property
    def normalizer(self) -> dict | None:
        """The raw normalizer section."""
        return self._doc.get("normalizer")

    @property
    def pre_tokenizer(self) -> dict | None:
        """The raw pre-tokenizer section."""
        return self._doc.get("pre_tokenizer")

    @property
    def post_processor(self) -> dict | None:
        """The raw post-processor section."""
        return self._doc.get("post_processor")

    @property
    def decoder(self) -> dict | None:
        """The raw decoder section."""
        return self._doc.get("decoder")

    # ---------------------------------------------------------------- sizes and ids
    @cached_property
    def vocab_size(self) -> int:
        """Total vocabulary including added tokens (`get_vocab_size(with_added_tokens=True)`)."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    @cached_property
    def id_to_token(self) -> dict[int, str]:
        """id → raw token string over the model vocabulary and the added tokens (shared: never mutate it)."""
        return _SHARED.view(self.digest, "id_to_token", self._read_id_to_token)

    def _read_id_to_token(self) -> dict[int, str]:
        out = {i: t for t, i in self.vocab.items()}
        for a in self.added_tokens:
            out[a.id] = a.content
        return out

    @cached_property
    def special_tokens(self) -> list[AddedToken]:
        """Added tokens marked special."""
        return [a for a in self.added_tokens if a.special]

    @cached_property
    def added_ids(self) -> frozenset[int]:
        """Ids of every added token (special or not)."""
        return frozenset(a.id for a in self.added_tokens)

    # ---------------------------------------------------------------- flavour
    @cached_property
    def is_byte_level(self) -> bool:
        """True for GPT-2-style byte-level BPE (a ByteLevel pre-tokenizer or decoder)."""
        for sec in (self.pre_tokenizer, self.decoder):
            if any(c.get("type") == "ByteLevel" for c in _walk_components(sec)):
                return True
        return False

    @cached_property
    def is_sentencepiece_style(self) -> bool:
        """True for SentencePiece-style vocabularies that mark spaces with `▁` (Llama-2, Mistral, Gemma, T5)."""
        if self.is_byte_level:
            return False
        for sec in (self.normalizer, self.pre_tokenizer, self.decoder):
            for c in _walk_components(sec):
                if c.get("type") == "Metaspace":
                    return True
                if c.get("type") == "Replace" and SPIECE_UNDERLINE in json.dumps(c, ensure_ascii=False):
                    return True
        return False

    @property
    def flavour(self) -> str:
        """One word for the vocabulary's encoding: byte-level, sentencepiece, wordpiece or plain."""
        if self.is_byte_level:
            return "byte-level"
        if self.is_sentencepiece_style:
            return "sentencepiece"
        if self.model_type == "WordPiece":
            return "wordpiece"
        return "plain"

    # ---------------------------------------------------------------- readable forms
    def token_bytes(self, token: str) -> bytes:
        """The UTF-8 bytes a raw vocabulary string stands for (byte-level map, `▁`, `<0xNN>`, `##`)."""
        if self.is_byte_level:
            if BYTE_LEVEL_ALPHABET.issuperset(token):
                return token.translate(BYTE_LEVEL_TABLE).encode("latin-1")
            return token.encode("utf-8")  # added tokens are stored as plain text
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            try:
                return bytes([int(token[3:5], 16)])
            except ValueError:
                pass
        text = token
        if self.is_sentencepiece_style:
            text = text.replace(SPIECE_UNDERLINE, " ")
        prefix = self.continuing_subword_prefix
        if prefix and text.startswith(prefix) and len(text) > len(prefix):
            text = text[len(prefix) :]
        suffix = self.end_of_word_suffix
        if suffix and text.endswith(suffix) and len(text) > len(suffix):
            text = text[: -len(suffix)]
        return text.encode("utf-8")

    def readable(self, token: str) -> str:
        """The text a raw token stands for; partial UTF-8 fragments shown as `⟨E2 80⟩`, never U+FFFD."""
        if token in self._added_contents:
            return token
        return readable_from_bytes(self.token_bytes(token))

    @cached_property
    def _added_contents(self) -> frozenset[str]:
        return frozenset(a.content for a in self.added_tokens)

    def is_byte_piece(self, token: str) -> bool:
        """True for the 256 single-byte pieces (`<0xNN>` in SentencePiece vocabularies)."""
        return len(token) == 6 and token.startswith("<0x") and token.endswith(">") and self.byte_fallback

    # ---------------------------------------------------------------- summary
    def inspect(self) -> TokenizerSummary:
        """The Inspect result: model, sizes, flags, pipeline, special tokens (:class:`TokenizerSummary`)."""
        return TokenizerSummary(
            name=self.name,
            source=self.source,
            model_type=self.model_type,
            flavour=self.flavour,
            vocab_size=self.vocab_size,
            model_vocab_size=self.tokenizer.get_vocab_size(with_added_tokens=False),
            merges=len(self.model.get("merges") or []) if self.model_type == "BPE" else 0,
            added_tokens=len(self.added_tokens),
            special_tokens=[a.content for a in self.special_tokens],
            ignore_merges=self.ignore_merges,
            byte_fallback=self.byte_fallback,
            dropout=self.dropout,
            continuing_subword_prefix=self.continuing_subword_prefix,
            end_of_word_suffix=self.end_of_word_suffix,
            unk_token=self.unk_token,
            normalizer=describe_component(self.normalizer),
            pre_tokenizer=describe_component(self.pre_tokenizer),
            post_processor=describe_component(self.post_processor),
            decoder=describe_component(self.decoder),
            content_hash=self.content_hash,
        )

    def summary(self) -> dict[str, Any]:
        """:meth:`inspect` as its JSON document (what `python -m analysis inspect --json` prints)."""
        return self.inspect().to_json()
