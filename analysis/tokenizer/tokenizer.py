"""The loaded-tokenizer view: one immutable `tokenizer.json` document and everything read from it.

Beside it: :mod:`.document` (checking a tokenizer.json document and building its parts), :mod:`.alphabets` (the
byte-level alphabet and readable forms of bytes) and :mod:`.shared` (the Rust tokenizer and views shared by every
view of the same bytes in this process).

`LoadedTokenizer` is what every other module takes. It never mutates its document: edits (extension,
pruning) call :meth:`LoadedTokenizer.document` to get a deep copy, change it and build a new object with
:meth:`LoadedTokenizer.from_document`.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import tokenizers

from analysis.core.inputs import parse_json
from analysis.errors import TokenizerLoadError, is_rust_panic

from . import shared
from .alphabets import BYTE_LEVEL_ALPHABET, BYTE_LEVEL_TABLE, SPIECE_UNDERLINE, readable_from_bytes
from .document import (
    AddedToken,
    check_document,
    check_encodes_unseen,
    describe_component,
    parse_merges,
    walk_components,
)


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


#: The attributes of a view set by its constructor (the rest of its `__dict__` is read from the bytes).
_OWN_ATTRS = frozenset({"_raw", "name", "source", "config", "identity"})


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
        shared.SHARED.mark_checked(obj.digest)
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
        # the same bytes passed the check in this process
        if checked or shared.SHARED.was_checked(obj.digest):
            _ = obj.tokenizer
            return obj
        doc = parse_json(raw, f"{name}: tokenizer.json", TokenizerLoadError)
        check_document(doc, name)
        obj.__dict__["_doc"] = doc
        _ = obj.tokenizer
        shared.SHARED.mark_checked(obj.digest)
        return obj

    def with_source(self, name: str | None = None, source: str | None = None) -> LoadedTokenizer:
        """The same tokenizer under another name or source label (shares the JSON bytes and everything already
        read from them: the parsed document, the Rust tokenizer, vocabulary views)."""
        view = LoadedTokenizer(
            self._raw,
            name=name or self.name,
            source=self.source if source is None else source,
            config=self.config,
        )
        # the cached properties depend on the bytes alone (never on the name or source): share them
        view.__dict__.update((k, v) for k, v in self.__dict__.items() if k not in _OWN_ATTRS)
        return view

    @property
    def nbytes(self) -> int:
        """The size of the tokenizer.json text, in bytes."""
        return len(self._raw)

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
        return shared.SHARED.tokenizer(self.digest, len(self._raw), self.fresh_tokenizer)

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
        check_encodes_unseen(tok, self.name)
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

    @cached_property
    def identity(self) -> str:
        """:attr:`content_hash`, followed by a digest of :attr:`config` when there is one: what tells two loaded
        tokenizers apart for a cache of whole tokenizer objects. Two folders with the same tokenizer.json but
        another chat template or special-token settings share every result computed from the bytes (keyed by
        :attr:`content_hash`), never one object."""
        if not self.config:
            return self.content_hash
        text = json.dumps(self.config, sort_keys=True, ensure_ascii=False, default=str)
        return f"{self.content_hash}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"

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
        return shared.SHARED.view(self.digest, "vocab", lambda: tok.get_vocab(with_added_tokens=False))

    @cached_property
    def added_tokens(self) -> list[AddedToken]:
        """The `added_tokens` entries, with ids as the Rust library resolved them (shared: never mutate it)."""
        return shared.SHARED.view(self.digest, "added_tokens", self._read_added_tokens)

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
        return shared.SHARED.view(self.digest, "id_to_token", self._read_id_to_token)

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
            if any(c.get("type") == "ByteLevel" for c in walk_components(sec)):
                return True
        return False

    @cached_property
    def is_sentencepiece_style(self) -> bool:
        """True for SentencePiece-style vocabularies that mark spaces with `▁` (Llama-2, Mistral, Gemma, T5)."""
        if self.is_byte_level:
            return False
        for sec in (self.normalizer, self.pre_tokenizer, self.decoder):
            for c in walk_components(sec):
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
