"""Extend a tokenizer with new tokens: continued BPE training vs naive extension (paper 000 §3.1, methods.md §4).

Methods (every one returns an :class:`Extension`: a new `LoadedTokenizer` built with
`LoadedTokenizer.from_document`, plus the added tokens):

* ``continued`` — the merges of :func:`analysis.training.continue_training`, appended in learned order;
* ``regen`` — naive: the first N tokens of an auxiliary tokenizer (trained with the `tokenizers` trainer on
  the same text, same normalizer/pre-tokenizer/alphabet) that the base lacks, with merges regenerated from
  token priorities (`generate_merges` semantics: every split into two vocabulary tokens, ordered by the new
  token's rank, then longer left part first);
* ``merges`` — naive: the same tokens, with the auxiliary tokenizer's merge list appended (merges whose
  parts and result are all in the combined vocabulary and that the base does not have);
* ``add-tokens`` — naive: the same tokens as `added_tokens` entries (what `tokenizer.add_tokens` does);
* ``wordpiece`` — BERT-style WordPiece: the auxiliary WordPiece vocabulary's non-overlapping tokens appended in
  index order (paper 002, Alg. 7).

New ids start after every existing id (model and added), so special tokens and post-processor ids keep their
values. A :class:`Plan` holds the one training run (continued) or auxiliary vocabulary (naive) from which any
prefix 1..N is applied; :class:`PrefixSimulator` measures a prefix on fixed texts without rebuilding the
tokenizer (exact for appended merges; checked against the real tokenizer in the tests).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import tokenizers
from tokenizers import pre_tokenizers, trainers

from .bpe import MergeTable, fold_merges, stt_tokenize_fn, unreachable_ids
from .errors import DataError, UnsupportedTokenizerError
from .tokenizer import SPIECE_UNDERLINE, LoadedTokenizer, added_token_entry, bpe_model
from .training import TrainingResult, continue_training, training_mode

METHODS = ("continued", "regen", "merges", "add-tokens", "wordpiece")
METHOD_LABELS = {
    "continued": "Continued BPE training",
    "regen": "Naive: new tokenizer + regenerated merges",
    "merges": "Naive: new tokenizer + appended merge list",
    "add-tokens": "Naive: add_tokens",
    "wordpiece": "WordPiece: append new vocabulary",
}


def methods_for(tok: LoadedTokenizer) -> list[str]:
    """The extension methods that apply to a tokenizer."""
    if tok.model_type == "BPE":
        try:
            training_mode(tok)
            return ["continued", "regen", "merges", "add-tokens"]
        except UnsupportedTokenizerError:
            return ["add-tokens"]
    if tok.model_type == "WordPiece":
        return ["wordpiece", "add-tokens"]
    return ["add-tokens"]


# --------------------------------------------------------------------------------------------------
# Result type and document helpers
# --------------------------------------------------------------------------------------------------
@dataclass
class Extension:
    """An extended tokenizer and what was added to it."""

    method: str
    base: LoadedTokenizer
    tokenizer: LoadedTokenizer
    added: list[str]
    added_ids: list[int]
    merges: list[tuple[str, str]] = field(default_factory=list)

    @property
    def n_added(self) -> int:
        """Number of tokens added."""
        return len(self.added)


def next_id(tok: LoadedTokenizer) -> int:
    """The first id after every model-vocabulary and added-token id."""
    ids = list(tok.vocab.values()) + [a.id for a in tok.added_tokens]
    return max(ids) + 1 if ids else 0


def _doc(tok: LoadedTokenizer) -> dict:
    """A fresh, editable copy of the tokenizer.json document."""
    return json.loads(tok.to_json())


def _ext_name(tok: LoadedTokenizer, method: str, n: int) -> str:
    return f"{tok.name} +{n} ({method})"


def _finish(
    base: LoadedTokenizer,
    doc: dict,
    method: str,
    added: list[str],
    ids: list[int],
    merges: list[tuple[str, str]],
) -> Extension:
    from .export import sync_post_processor

    sync_post_processor(doc)
    new = LoadedTokenizer.from_document(
        doc, name=_ext_name(base, method, len(added)), source=base.source, config=base.config
    )
    rust = new.tokenizer
    for a in base.added_tokens:  # special/added token ids must survive the rebuild
        if rust.token_to_id(a.content) != a.id:
            raise UnsupportedTokenizerError(
                f"{base.name}: extending would move added token {a.content!r} from id {a.id} to "
                f"{rust.token_to_id(a.content)}; this vocabulary layout is not supported"
            )
    for t, i in zip(added, ids):
        if rust.token_to_id(t) != i:
            raise UnsupportedTokenizerError(f"{base.name}: new token {t!r} did not get id {i}")
    return Extension(method, base, new, added, ids, merges)


_MERGE_SETS: dict[str, frozenset] = {}


def _merge_set(base: LoadedTokenizer) -> frozenset:
    """The base merges as a frozenset (cached per tokenizer content; a few recent ones kept)."""
    hit = _MERGE_SETS.get(base.content_hash)
    if hit is None:
        if len(_MERGE_SETS) > 4:
            _MERGE_SETS.pop(next(iter(_MERGE_SETS)))
        hit = _MERGE_SETS[base.content_hash] = frozenset(base.merges)
    return hit


def filter_merges(
    base: LoadedTokenizer, new_tokens: Sequence[str], candidates: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Keep (a, b) only if a, b and a+b are in the combined vocabulary and the base lacks the merge (§4)."""
    vocab = base.vocab
    new = set(new_tokens)
    have = _merge_set(base)
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    for a, b in candidates:
        if (a, b) in have or (a, b) in seen:
            continue
        if (a in vocab or a in new) and (b in vocab or b in new) and ((a + b) in vocab or (a + b) in new):
            out.append((a, b))
            seen.add((a, b))
    return out


def append_to_model(
    base: LoadedTokenizer, tokens: Sequence[str], merges: Sequence[tuple[str, str]], method: str
) -> Extension:
    """New model-vocabulary tokens (ids after every existing id) plus merges appended after the base merges."""
    doc = _doc(base)
    model = doc["model"]
    vocab = model["vocab"]
    # `tokenizers` numbers added tokens that are outside the model vocabulary from the model vocabulary's
    # *size*, so appending to the model would shift them; keep their ids by moving them into the model
    # vocabulary at the ids they already have (Llama-3's 256 specials, Qwen's <|endoftext|> …).
    used = set(vocab.values())
    for a in base.added_tokens:
        if a.content not in vocab and a.id not in used:
            vocab[a.content] = a.id
            used.add(a.id)
    added_contents = {a.content for a in base.added_tokens}
    nid = next_id(base)
    added: list[str] = []
    ids: list[int] = []
    for t in tokens:
        if t in vocab or t in added_contents or t in added:
            continue
        vocab[t] = nid
        added.append(t)
        ids.append(nid)
        nid += 1
    if model.get("type") == "BPE":
        kept = filter_merges(base, added, merges)
        model["merges"] = [list(m) for m in base.merges] + [list(m) for m in kept]
    else:
        kept = []
    return _finish(base, doc, method, added, ids, kept)


# --------------------------------------------------------------------------------------------------
# Auxiliary tokenizer (naive baselines)
# --------------------------------------------------------------------------------------------------
@dataclass
class AuxVocab:
    """An auxiliary tokenizer trained from scratch on the extension text with the `tokenizers` trainer."""

    kind: str
    tokens: list[str]
    merges: list[tuple[str, str]]
    seconds: float = 0.0
    vocab_size: int = 0


def _aux_pipeline(base: LoadedTokenizer) -> tuple[dict | None, dict | None, list[str]]:
    """(normalizer, pre_tokenizer, initial alphabet) for the auxiliary tokenizer."""
    mode = training_mode(base) if base.model_type == "BPE" else "wordpiece"
    norm = base.normalizer
    pre = base.pre_tokenizer
    alphabet: list[str] = []
    if mode == "byte-level":
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    elif mode == "sentencepiece":
        split = {
            "type": "Split",
            "pattern": {"String": SPIECE_UNDERLINE},
            "behavior": "MergedWithNext",
            "invert": False,
        }
        digits = {"type": "Digits", "individual_digits": True}
        pres = [pre] if pre else []
        pre = {"type": "Sequence", "pretokenizers": pres + [split, digits]}
    return norm, pre, alphabet


def train_auxiliary(
    base: LoadedTokenizer, units: Iterable[str], vocab_size: int, *, max_token_length: int | None = None
) -> AuxVocab:
    """Train a BPE (or, for WordPiece bases, WordPiece) tokenizer from scratch on the text, base's pipeline."""
    t0 = time.perf_counter()
    norm, pre, alphabet = _aux_pipeline(base)
    if base.model_type == "WordPiece":
        prefix = base.continuing_subword_prefix or "##"
        model = {
            "type": "WordPiece",
            "unk_token": base.unk_token or "[UNK]",
            "continuing_subword_prefix": prefix,
            "max_input_chars_per_word": 100,
            "vocab": {},
        }
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, show_progress=False, special_tokens=[], continuing_subword_prefix=prefix
        )
        kind = "wordpiece"
    else:
        model = bpe_model()
        sp = base.is_sentencepiece_style and not base.is_byte_level
        mtl = max_token_length or (16 if sp else None)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            show_progress=False,
            special_tokens=[],
            initial_alphabet=alphabet,
            max_token_length=mtl,
        )
        kind = "bpe"
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": norm,
        "pre_tokenizer": pre,
        "post_processor": None,
        "decoder": None,
        "model": model,
    }
    aux = tokenizers.Tokenizer.from_str(json.dumps(doc))
    aux.train_from_iterator(units, trainer=trainer)
    d = json.loads(aux.to_str())
    vocab = d["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    from .tokenizer import parse_merges

    merges = parse_merges(d["model"].get("merges") or []) if kind == "bpe" else []
    return AuxVocab(kind, tokens, merges, time.perf_counter() - t0, vocab_size)


def aux_new_tokens(base: LoadedTokenizer, aux: AuxVocab, n: int | None = None) -> list[str]:
    """The auxiliary tokens the base lacks, in the auxiliary vocabulary's order (first n)."""
    vocab = base.vocab
    added = {a.content for a in base.added_tokens}
    out = []
    for t in aux.tokens:
        if t not in vocab and t not in added:
            out.append(t)
            if n is not None and len(out) >= n:
                break
    return out


def train_auxiliary_for(
    base: LoadedTokenizer, units: Callable[[], Iterable[str]], n: int, *, max_token_length: int | None = None
) -> AuxVocab:
    """Train an auxiliary tokenizer large enough to give n new tokens (grows the size up to 3 times)."""
    size = 256 + 2 * n if base.model_type != "WordPiece" else 1000 + 2 * n
    aux = None
    for _ in range(4):
        aux = train_auxiliary(base, units(), size, max_token_length=max_token_length)
        have = len(aux_new_tokens(base, aux, n))
        if have >= n or len(aux.tokens) < size:  # enough, or the text has no more to give
            break
        size = int(size + (n - have) * 2.5) + 256
    assert aux is not None
    return aux


# --------------------------------------------------------------------------------------------------
# Naive extension: regenerated merges, appended merge list, add_tokens, WordPiece
# --------------------------------------------------------------------------------------------------
def regen_merges(new_tokens: Sequence[str], vocab: dict[str, int]) -> list[tuple[str, str]]:
    """Merges for new tokens from priorities: every split into two vocab tokens; rank, then longer left first.

    `vocab` is the combined vocabulary (token → id); new token i has score −(i+1), and candidates are
    sorted by (score, len(left), len(right)) descending after a per-token sort by (id(left), id(right)).
    """
    cands: list[tuple[int, str, str]] = []
    for rank, t in enumerate(new_tokens):
        local = [(t[:k], t[k:]) for k in range(1, len(t)) if t[:k] in vocab and t[k:] in vocab]
        local.sort(key=lambda p: (vocab[p[0]], vocab[p[1]]))
        cands.extend((-(rank + 1), a, b) for a, b in local)
    cands.sort(key=lambda c: (c[0], len(c[1]), len(c[2])), reverse=True)
    return [(a, b) for _, a, b in cands]


def extend_regen(base: LoadedTokenizer, tokens: Sequence[str]) -> Extension:
    """Naive extension with regenerated merges (methods.md §4, `generate_merges` semantics)."""
    nid = next_id(base)
    combined = dict(base.vocab)
    for i, t in enumerate(tokens):
        combined.setdefault(t, nid + i)
    return append_to_model(base, tokens, regen_merges(tokens, combined), "regen")


def extend_add_tokens(base: LoadedTokenizer, tokens: Sequence[str]) -> Extension:
    """Naive extension through `added_tokens` (what `add_tokens` does): plain-text contents, not normalized."""
    doc = _doc(base)
    existing = {a.content for a in base.added_tokens}
    nid = next_id(base)
    added: list[str] = []
    ids: list[int] = []
    for c in added_token_contents(base, tokens):
        if c in existing or c in added:
            continue
        doc.setdefault("added_tokens", []).append(added_token_entry(nid, c, special=False))
        added.append(c)
        ids.append(nid)
        nid += 1
    return _finish(base, doc, "add-tokens", added, ids, [])


def added_token_contents(base: LoadedTokenizer, tokens: Sequence[str]) -> list[str]:
    """The plain-text form of vocabulary strings (skipping partial UTF-8 and empty ones)."""
    out = []
    for t in tokens:
        try:
            c = base.token_bytes(t).decode("utf-8")
        except UnicodeDecodeError:
            continue
        # a content equal to a model-vocabulary string would get that string's id (byte-level 'õ' = byte F5)
        if c and c.strip() and c not in base.vocab:
            out.append(c)
    return out


def extend_wordpiece(base: LoadedTokenizer, tokens: Sequence[str]) -> Extension:
    """WordPiece extension (paper 002 Alg. 7): append non-overlapping tokens in order with the next ids."""
    if base.model_type != "WordPiece":
        raise UnsupportedTokenizerError(
            f"the WordPiece method needs a WordPiece tokenizer; {base.name} is {base.model_type}"
        )
    return append_to_model(base, tokens, [], "wordpiece")


# --------------------------------------------------------------------------------------------------
# Plans: one training run / one auxiliary vocabulary → every prefix
# --------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    """Everything needed to apply a method at any n ≤ n_max without retraining."""

    method: str
    base: LoadedTokenizer
    n_max: int
    training: TrainingResult | None = None
    aux: AuxVocab | None = None
    seconds: float = 0.0
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def n_available(self) -> int:
        """How many new tokens this plan can give (may be < n_max on a small text)."""
        if self.training is not None:
            return self.training.n_new
        return len(self.all_tokens())

    def all_tokens(self) -> list[str]:
        """Every candidate new token in order (raw vocabulary strings)."""
        if "all" not in self._cache:
            if self.training is not None:
                toks = self.training.new_tokens()
            else:
                assert self.aux is not None
                toks = aux_new_tokens(self.base, self.aux, self.n_max)
            self._cache["all"] = toks
        return self._cache["all"]

    def tokens(self, n: int) -> list[str]:
        """The new tokens of the prefix n."""
        return self.all_tokens()[:n]

    def merges(self, n: int) -> list[tuple[str, str]]:
        """The merges appended for the prefix n (empty for add-tokens / wordpiece); cached per n."""
        key = ("merges", n)
        if key not in self._cache:
            if len(self._cache) > 16:
                for k in [k for k in self._cache if k != "all"][:8]:
                    del self._cache[k]
            self._cache[key] = self._merges(n)
        return self._cache[key]

    def _merges(self, n: int) -> list[tuple[str, str]]:
        toks = self.tokens(n)
        if self.method == "continued":
            assert self.training is not None
            return filter_merges(self.base, toks, self.training.merges(n))
        if self.method == "regen":
            nid = next_id(self.base)
            combined = dict(self.base.vocab)
            for i, t in enumerate(toks):
                combined.setdefault(t, nid + i)
            return filter_merges(self.base, toks, regen_merges(toks, combined))
        if self.method == "merges":
            assert self.aux is not None
            return filter_merges(self.base, toks, self.aux.merges)
        return []

    def apply(self, n: int) -> Extension:
        """Build the extended tokenizer for the first n new tokens."""
        n = min(n, self.n_available)
        toks = self.tokens(n)
        if self.method == "continued":
            return append_to_model(self.base, toks, self.merges(n), "continued")
        if self.method == "regen":
            return extend_regen(self.base, toks)
        if self.method == "merges":
            return append_to_model(self.base, toks, self.merges(n), "merges")
        if self.method == "add-tokens":
            return extend_add_tokens(self.base, toks)
        if self.method == "wordpiece":
            return extend_wordpiece(self.base, toks)
        raise DataError(f"unknown extension method {self.method!r} (choose from {', '.join(METHODS)})")


def _reiter(units) -> Callable[[], Iterable[str]]:
    if callable(units) and not hasattr(units, "__iter__"):
        return units
    if hasattr(units, "__next__"):
        kept = list(units)
        return lambda: iter(kept)
    return lambda: iter(units)


def plan(
    base: LoadedTokenizer,
    method: str,
    units: Any,
    n_max: int,
    *,
    max_token_length: int | None = None,
    aux: AuxVocab | None = None,
    training: TrainingResult | None = None,
) -> Plan:
    """Run the training a method needs once (continued training or the auxiliary tokenizer) for up to n_max."""
    if method not in METHODS:
        raise DataError(f"unknown extension method {method!r} (choose from {', '.join(METHODS)})")
    if method not in methods_for(base):
        raise UnsupportedTokenizerError(
            f"method {method!r} does not apply to {base.name} ({base.model_type}); "
            f"available: {', '.join(methods_for(base))}"
        )
    if n_max <= 0:
        raise DataError("the number of new tokens must be positive")
    t0 = time.perf_counter()
    get = _reiter(units)
    if method == "continued":
        training = training or continue_training(base, get, n_max, max_token_length=max_token_length)
        return Plan(method, base, n_max, training=training, seconds=time.perf_counter() - t0)
    aux = aux or train_auxiliary_for(base, get, n_max, max_token_length=max_token_length)
    p = Plan(method, base, n_max, aux=aux, seconds=time.perf_counter() - t0)
    if not p.all_tokens():
        raise DataError("the training text gave no token the tokenizer does not already have")
    return p


def extend(
    base: LoadedTokenizer, method: str, units: Any, n: int, *, max_token_length: int | None = None
) -> Extension:
    """One-shot: train what the method needs on the text and return the tokenizer extended by n tokens."""
    return plan(base, method, units, n, max_token_length=max_token_length).apply(n)


# --------------------------------------------------------------------------------------------------
# Fast, exact measurement of a prefix on fixed texts
# --------------------------------------------------------------------------------------------------
#: Prefix marking a new added-token match in simulated rows (so it never equals a vocabulary string).
ADDED_MARK = "\x00"


def _bytes_of_piece(t: str) -> list[str]:
    return [f"<0x{b:02X}>" for b in t.encode("utf-8")]


def _without(unit: tuple[str, ...], drop: set[str]) -> tuple[str, ...]:
    """A unit with the characters of a prefix that lacks them (`drop`) spelled as byte-fallback pieces."""
    if drop and any(t in drop for t in unit):
        return tuple(x for t in unit for x in (_bytes_of_piece(t) if t in drop else (t,)))
    return unit


def _merged(unit: tuple[str, ...], table: MergeTable, whole: set[str] | None = None) -> tuple[str, ...]:
    """A unit after the appended merges; with `whole` (ignore_merges), a unit that spells one of those tokens
    becomes that token without merging."""
    if whole and len(unit) > 1:
        joined = "".join(unit)
        if joined in whole:
            return (joined,)
    return table.apply(unit)


class PrefixSimulator:
    """Tokenize fixed texts with base + appended merges of a prefix, without building the tokenizer.

    The texts are encoded once with the base tokenizer (Rust); the pre-tokens (and, for SentencePiece
    vocabularies, `▁`-chunks, which no merge crosses) are deduplicated. For a prefix, each distinct unit is
    re-merged with the appended merges only — base merges never involve the new tokens and always outrank
    them — by the same lowest-rank-leftmost rule as `tokenizers`; `ignore_merges` is honoured. For
    `add-tokens`, lines are split on the added contents and the pieces are encoded with the base.
    """

    def __init__(
        self, base: LoadedTokenizer, texts: dict[str, Sequence[str]], extra_chars: Sequence[str] = ()
    ) -> None:
        self.base = base
        self.texts = {k: [s for s in v if s] for k, v in texts.items()}
        self.extra_chars = list(extra_chars)
        work = base
        if self.extra_chars:
            from .training import with_characters

            work = with_characters(base, self.extra_chars)
        self.work = work
        self.ignore_merges = base.ignore_merges
        sp = not base.is_byte_level and base.is_sentencepiece_style
        self.units: list[tuple[str, ...]] = []
        unit_index: dict[tuple[str, ...], int] = {}
        self.lines: dict[str, list[list[int]]] = {}
        self.line_bytes: dict[str, list[int]] = {}
        if base.dropout:
            tk = work.fresh_tokenizer()
            tk.model.dropout = None
        else:
            tk = work.tokenizer  # read-only use of the shared tokenizer
        for name, lines in self.texts.items():
            rows: list[list[int]] = []
            for enc in tk.encode_batch(list(lines), add_special_tokens=False):
                row: list[int] = []
                cur: list[str] = []
                prev_w = None
                for t, w in zip(enc.tokens, enc.word_ids):
                    boundary = w != prev_w or (
                        sp and cur and t[0] == SPIECE_UNDERLINE and cur[-1][-1] != SPIECE_UNDERLINE
                    )
                    if boundary and cur:
                        key = tuple(cur)
                        i = unit_index.get(key)
                        if i is None:
                            i = unit_index[key] = len(self.units)
                            self.units.append(key)
                        row.append(i)
                        cur = []
                    cur.append(t)
                    prev_w = w
                if cur:
                    key = tuple(cur)
                    i = unit_index.get(key)
                    if i is None:
                        i = unit_index[key] = len(self.units)
                        self.units.append(key)
                    row.append(i)
                rows.append(row)
            self.lines[name] = rows
            self.line_bytes[name] = [len(s.encode("utf-8")) for s in lines]
        self.unit_counts: dict[str, Counter] = {
            name: Counter(i for row in rows for i in row) for name, rows in self.lines.items()
        }
        self.base_ids = {**work.vocab, **{a.content: a.id for a in work.added_tokens}}
        self._base_line_tokens = {name: self.line_tokens(name, {}) for name in self.lines}

    # ------------------------------------------------------------------ core
    def segment(
        self, merges: Sequence[tuple[str, str]], new_tokens: Sequence[str], names: Iterable[str] | None = None
    ) -> dict[int, tuple[str, ...]]:
        """unit index → its segmentation under base + appended merges (only units that change).

        Each unit is the base segmentation of a pre-token (final under the base merges); the appended merges
        run over it by the replay's merge loop (:class:`analysis.bpe.MergeTable`).
        """
        table = MergeTable(merges)
        newset = set(new_tokens)
        drop = {c for c in self.extra_chars if c not in newset}
        wanted = set()
        for name in names or self.lines:
            wanted.update(self.unit_counts[name])
        out: dict[int, tuple[str, ...]] = {}
        if not len(table) and not drop:
            return out
        lefts = {a for a, _ in merges}
        for i in wanted:
            u = self.units[i]
            if not drop and (len(u) < 2 or not any(t in lefts for t in u[:-1])):
                if not (self.ignore_merges and len(u) > 1 and "".join(u) in newset):
                    continue
            seg = _merged(_without(u, drop), table, newset if self.ignore_merges else None)
            if seg != u:
                out[i] = seg
        return out

    def line_tokens(self, name: str, changed: dict[int, tuple[str, ...]]) -> list[list[str]]:
        """Token strings per line of one text under a segmentation from :meth:`segment`."""
        units = self.units
        return [[t for i in row for t in changed.get(i, units[i])] for row in self.lines[name]]

    def measure(
        self, merges: Sequence[tuple[str, str]], new_tokens: Sequence[str], names: Iterable[str] | None = None
    ) -> dict[str, dict]:
        """Per text: bytes, tokens, bytes_per_token and new-token usage counts for a prefix."""
        names = list(names or self.lines)
        changed = self.segment(merges, new_tokens, names)
        newset = set(new_tokens)
        out = {}
        for name in names:
            n_tok = 0
            used: Counter = Counter()
            units = self.units
            for i, c in self.unit_counts[name].items():
                seg = changed.get(i, units[i])
                n_tok += c * len(seg)
                for t in seg:
                    if t in newset:
                        used[t] += c
            out[name] = self._measurement(name, n_tok, used)
        return out

    def _measurement(self, name: str, n_tok: int, used: dict[str, int]) -> dict:
        """bytes, tokens, bytes/token and new-token counts of one text."""
        n_bytes = sum(self.line_bytes[name])
        return {
            "bytes": n_bytes,
            "tokens": n_tok,
            "bytes_per_token": n_bytes / n_tok if n_tok else 0.0,
            "new_token_counts": used,
        }

    # ------------------------------------------------------------------ add_tokens
    def measure_added(self, contents: Sequence[str], names: Iterable[str] | None = None) -> dict[str, dict]:
        """Like :meth:`measure` for tokens added as non-normalized `added_tokens` (leftmost-longest split)."""
        names = list(names or self.lines)
        out = {}
        rows = self.added_line_tokens(contents, names)
        newset = {ADDED_MARK + c for c in contents}
        for name in names:
            toks = rows[name]
            n_tok = sum(map(len, toks))
            used = Counter(t for row in toks for t in row if t in newset)
            out[name] = self._measurement(name, n_tok, used)
        return out

    def added_line_tokens(self, contents: Sequence[str], names: Iterable[str]) -> dict[str, list[list[str]]]:
        """Token strings per line when `contents` are added tokens (raw-text split, base for the rest).

        A match of a new added token is returned as `ADDED_MARK + content`.
        """
        names = list(names)
        if not contents:
            return {n: self._base_line_tokens[n] for n in names}
        rx = re.compile("|".join(re.escape(c) for c in sorted(set(contents), key=len, reverse=True)))
        existing = sorted({a.content for a in self.base.added_tokens}, key=len, reverse=True)
        rx_all = re.compile(
            "|".join(re.escape(c) for c in sorted(set(contents) | set(existing), key=len, reverse=True))
        )
        tk = self.base.tokenizer
        newset = set(contents)
        out = {}
        for name in names:
            pieces_per_line: list[list[tuple[str, bool]]] = []
            todo: set[str] = set()
            for line in self.texts[name]:
                if rx.search(line) is None:
                    pieces_per_line.append([(line, False)])
                    continue
                parts: list[tuple[str, bool]] = []
                pos = 0
                for m in rx_all.finditer(line):
                    if m.start() > pos:
                        parts.append((line[pos : m.start()], False))
                        todo.add(line[pos : m.start()])
                    parts.append((m.group(0), True))
                    pos = m.end()
                if pos < len(line):
                    parts.append((line[pos:], False))
                    todo.add(line[pos:])
                pieces_per_line.append(parts)
            todo_l = sorted(todo)
            encoded = dict(zip(todo_l, (e.tokens for e in tk.encode_batch(todo_l, add_special_tokens=False))))
            rows = []
            for li, parts in enumerate(pieces_per_line):
                if len(parts) == 1 and not parts[0][1]:
                    rows.append(self._base_line_tokens[name][li])
                    continue
                row: list[str] = []
                for p, is_added in parts:
                    row.extend([ADDED_MARK + p if p in newset else p] if is_added else encoded[p])
                rows.append(row)
            out[name] = rows
        return out

    def ids(self, tokens: Sequence[str], new_ids: dict[str, int]) -> list[int]:
        """Map token strings to ids (new tokens first, then the base vocabulary and added tokens)."""
        b = self.base_ids
        return [new_ids[t] if t in new_ids else b[t] for t in tokens]

    def base_line_tokens(self, name: str) -> list[list[str]]:
        """Base tokenization (token strings) of each line of one text."""
        return self._base_line_tokens[name]


def levenshtein(a: Sequence, b: Sequence) -> int:
    """Edit distance between two sequences (insertions, deletions, substitutions cost 1)."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def tokenization_change(base_rows: Sequence[Sequence], new_rows: Sequence[Sequence]) -> dict[str, float]:
    """Exact-match share and mean normalised Levenshtein distance between two tokenizations (paper 000 Tab. 6).

    The distance of a sentence is the edit distance between the token sequences divided by the base length.
    """
    if not base_rows:
        return {"exact_match": float("nan"), "levenshtein": float("nan"), "levenshtein_max": float("nan")}
    em = 0
    dists = []
    for a, b in zip(base_rows, new_rows):
        a, b = list(a), list(b)
        if a == b:
            em += 1
            dists.append(0.0)
        else:
            dists.append(levenshtein(a, b) / max(1, len(a)))
    return {
        "exact_match": em / len(base_rows),
        "levenshtein": sum(dists) / len(dists),
        "levenshtein_max": max(dists),
    }


# --------------------------------------------------------------------------------------------------
# Report of one run (CLI, export)
# --------------------------------------------------------------------------------------------------
def unreachable_added(ext: Extension) -> list[str]:
    """Added tokens that the Self-Tokenization Test cannot reach (methods.md §2; 0 for non-BPE / added)."""
    if ext.tokenizer.model_type != "BPE" or ext.method == "add-tokens":
        return []
    bad = unreachable_ids(ext.tokenizer)
    ids = set(ext.added_ids)
    return [ext.tokenizer.id_to_token[i] for i in sorted(bad & ids)]


def extension_report(
    ext: Extension,
    *,
    n_requested: int,
    text: str = "",
    text_chars: int | None = None,
    heldout: dict[str, Sequence[str]] | None = None,
    seconds: float | None = None,
) -> dict:
    """The JSON report of one extension run: method, text, N, added/unreachable counts, bytes/token before/after."""
    from .metrics import bytes_per_token

    unreach = unreachable_added(ext)
    rep: dict = {
        "base": ext.base.name,
        "base_hash": ext.base.content_hash,
        "method": ext.method,
        "method_label": METHOD_LABELS.get(ext.method, ext.method),
        "n_requested": n_requested,
        "added": ext.n_added,
        "merges_added": len(ext.merges),
        "unreachable_added": len(unreach),
        "unreachable_tokens": [ext.tokenizer.readable(t) for t in unreach[:200]],
        "vocab_size_before": ext.base.vocab_size,
        "vocab_size_after": ext.tokenizer.vocab_size,
        "text": text,
        "text_chars": text_chars,
        "seconds": seconds,
        "added_tokens": [
            {"id": i, "token": t, "text": ext.tokenizer.readable(t) if ext.method != "add-tokens" else t}
            for t, i in zip(ext.added, ext.added_ids)
        ],
    }
    if heldout:
        per = {}
        for name, lines in heldout.items():
            b0 = bytes_per_token(ext.base, list(lines))
            b1 = bytes_per_token(ext.tokenizer, list(lines))
            per[name] = {
                "bytes_per_token_before": b0,
                "bytes_per_token_after": b1,
                "delta_rel": (b1 - b0) / b0 if b0 else float("nan"),
            }
        first = next(iter(per.values()))
        rep["bytes_per_token_before"] = first["bytes_per_token_before"]
        rep["bytes_per_token_after"] = first["bytes_per_token_after"]
        rep["heldout"] = per
    return rep


def stt_model_tokenize(base: LoadedTokenizer, extra_chars: Sequence[str] = ()) -> Callable[[str], list]:
    """`model.tokenize` with ignore_merges off and no dropout (of base plus extra characters, if any)."""
    if not extra_chars:
        return stt_tokenize_fn(base)
    from .training import with_characters

    return with_characters(base, list(extra_chars)).fresh_tokenizer(merges_only=True).model.tokenize


def simulated_unreachable(
    base: LoadedTokenizer,
    merges: Sequence[tuple[str, str]],
    new_tokens: Sequence[str],
    extra_chars: Sequence[str] = (),
    tokenize: Callable[[str], list] | None = None,
) -> list[str]:
    """STT of the new tokens of a prefix without building the tokenizer (model only, ignore_merges off).

    Each new token's string is segmented by the base model (Rust, ignore_merges off, no dropout), then
    re-merged with the appended merges; it is unreachable unless that gives exactly the token itself.
    """
    if tokenize is None:
        tokenize = stt_model_tokenize(base, extra_chars)
    table = MergeTable(merges)
    newset = set(new_tokens)
    chars = set(extra_chars)
    drop = {c for c in chars if c not in newset}
    out = []
    for t in new_tokens:
        if t in chars:
            continue
        unit = _without(tuple(x.value for x in tokenize(t)), drop)
        if table.apply(unit) != (t,):
            out.append(t)
    return out


# --------------------------------------------------------------------------------------------------
# Live preview: every method at any n, from cached plans, without rebuilding tokenizers
# --------------------------------------------------------------------------------------------------
def _single_chars(base: LoadedTokenizer, tokens: Sequence[str]) -> list[str]:
    """New single-character tokens (SentencePiece-style vocabularies: they replace byte-fallback pieces)."""
    if base.is_byte_level:
        return []
    vocab = base.vocab
    return [t for t in tokens if len(t) == 1 and t not in vocab]


class Preview:
    """Before/after metrics of several extension plans on fixed texts, at any n ≤ each plan's size.

    `texts` maps a label to lines; `target` names the held-out target text, `english` the English one
    (exact match / Levenshtein to the base tokenization, paper 000 Table 6), `sentence` is shown before/after.
    """

    def __init__(
        self,
        base: LoadedTokenizer,
        plans: dict[str, Plan],
        texts: dict[str, Sequence[str]],
        target: str,
        english: str | None = None,
        sentence: str | None = None,
    ) -> None:
        self.base = base
        self.plans = plans
        self.texts = {k: [s for s in v if s] for k, v in texts.items()}
        self.target = target
        self.english = english
        self.sentence = sentence or (self.texts[target][0] if self.texts.get(target) else "")
        self._sims: dict[tuple[str, ...], PrefixSimulator] = {}
        self._stt: dict[tuple[str, ...], Callable[[str], list]] = {}
        self._real: dict[tuple[str, int], Extension] = {}

    def sim_for(self, method: str) -> PrefixSimulator:
        """The simulator matching a plan (SentencePiece plans that add characters need them pre-split)."""
        p = self.plans[method]
        extra = (
            tuple(_single_chars(self.base, p.all_tokens()))
            if method in ("continued", "regen", "merges")
            else ()
        )
        sim = self._sims.get(extra)
        if sim is None:
            texts = dict(self.texts)
            texts["__sentence__"] = [self.sentence] if self.sentence else []
            sim = self._sims[extra] = PrefixSimulator(self.base, texts, extra_chars=extra)
        return sim

    def stt_tokenize(self, extra: tuple[str, ...] = ()) -> Callable[[str], list]:
        """Cached model-only tokenize (ignore_merges off) for the STT of new tokens."""
        fn = self._stt.get(extra)
        if fn is None:
            fn = self._stt[extra] = stt_model_tokenize(self.base, extra)
        return fn

    def base_metrics(self) -> dict[str, float]:
        """Bytes/token of the base tokenizer on every text."""
        sim = self.sim_for(next(iter(self.plans))) if self.plans else PrefixSimulator(self.base, self.texts)
        m = sim.measure([], [], list(self.texts))
        return {k: v["bytes_per_token"] for k, v in m.items()}

    def rows_at(
        self, method: str, n: int, names: Sequence[str]
    ) -> tuple[dict[str, list[list[int]]], dict, list]:
        """(ids per line for each text, new token → id, added list) for method at n."""
        p = self.plans[method]
        n = min(n, p.n_available)
        toks = p.tokens(n)
        nid = next_id(self.base)
        if method in ("continued", "regen", "merges"):
            sim = self.sim_for(method)
            added = [t for t in dict.fromkeys(toks) if t not in self.base.vocab]
            new_ids = {t: nid + i for i, t in enumerate(added)}
            changed = sim.segment(p.merges(n), toks, names)
            return (
                {k: [sim.ids(r, new_ids) for r in sim.line_tokens(k, changed)] for k in names},
                new_ids,
                added,
            )
        if method == "add-tokens":
            sim = self.sim_for(method)
            added = list(dict.fromkeys(added_token_contents(self.base, toks)))
            added = [c for c in added if c not in {a.content for a in self.base.added_tokens}]
            new_ids = {ADDED_MARK + c: nid + i for i, c in enumerate(added)}
            rows = sim.added_line_tokens(added, names)
            return {k: [sim.ids(r, new_ids) for r in rows[k]] for k in names}, new_ids, added
        ext = self.extension(method, n)  # WordPiece: small vocabularies, build the real tokenizer
        rows = {}
        for k in names:
            lines = self.texts[k] if k != "__sentence__" else [self.sentence]
            rows[k] = [e.ids for e in ext.tokenizer.tokenizer.encode_batch(lines, add_special_tokens=False)]
        return rows, dict(zip(ext.added, ext.added_ids)), ext.added

    def extension(self, method: str, n: int) -> Extension:
        """The real extended tokenizer (built once per method and n; used for export)."""
        key = (method, n)
        if key not in self._real:
            self._real[key] = self.plans[method].apply(n)
        return self._real[key]

    def at(self, method: str, n: int) -> dict:
        """All preview numbers for one method at n."""
        t0 = time.perf_counter()
        p = self.plans[method]
        names = list(self.texts) + (["__sentence__"] if self.sentence else [])
        rows, new_ids, added = self.rows_at(method, n, names)
        base_rows = self._base_rows(names)
        id_new = set(new_ids.values())
        per_text = {}
        used_counts: Counter = Counter()
        for k in self.texts:
            nbytes = sum(len(s.encode("utf-8")) for s in self.texts[k])
            t_before = sum(map(len, base_rows[k]))
            t_after = sum(map(len, rows[k]))
            b0 = nbytes / t_before if t_before else float("nan")
            b1 = nbytes / t_after if t_after else float("nan")
            per_text[k] = {"before": b0, "after": b1, "delta_rel": (b1 - b0) / b0 if b0 else float("nan")}
            if k == self.target:
                used_counts = Counter(i for r in rows[k] for i in r if i in id_new)
        if method in ("continued", "regen", "merges"):
            extra = tuple(_single_chars(self.base, p.all_tokens()))
            unreachable = simulated_unreachable(
                self.base, p.merges(min(n, p.n_available)), p.tokens(n), extra, self.stt_tokenize(extra)
            )
        else:
            unreachable = []
        out = {
            "method": method,
            "label": METHOD_LABELS.get(method, method),
            "n": min(n, p.n_available),
            "added": len(added),
            "texts": per_text,
            "unreachable": unreachable,
            "unreachable_added": len(unreachable),
            "used_share": len(used_counts) / len(added) if added else float("nan"),
            "used_counts": {i: c for i, c in used_counts.items()},
            "new_ids": new_ids,
            "added_tokens": added,
        }
        if self.english and self.english in self.texts:
            out["english"] = tokenization_change(base_rows[self.english], rows[self.english])
        if self.sentence:
            out["sentence_before"] = base_rows["__sentence__"][0] if base_rows["__sentence__"] else []
            out["sentence_after"] = rows["__sentence__"][0] if rows["__sentence__"] else []
        out["seconds"] = time.perf_counter() - t0
        return out

    def _base_rows(self, names: Sequence[str]) -> dict[str, list[list[int]]]:
        if "__base__" not in self._real:
            tk = self.base.tokenizer
            rows = {}
            for k in list(self.texts) + ["__sentence__"]:
                lines = self.texts[k] if k != "__sentence__" else ([self.sentence] if self.sentence else [])
                rows[k] = [e.ids for e in tk.encode_batch(lines, add_special_tokens=False)] if lines else []
            self._real["__base__"] = rows  # type: ignore[assignment]
        return self._real["__base__"]  # type: ignore[return-value]

    def curve(self, method: str, points: Sequence[int]) -> list[tuple[int, float]]:
        """Bytes/token on the target text at each n of `points` (one plan, no retraining)."""
        p = self.plans[method]
        out = []
        if method in ("continued", "regen", "merges"):
            sim = self.sim_for(method)
            for n in points:
                n = min(n, p.n_available)
                m = sim.measure(p.merges(n), p.tokens(n), [self.target])
                out.append((n, m[self.target]["bytes_per_token"]))
        elif method == "add-tokens":
            sim = self.sim_for(method)
            for n in points:
                contents = added_token_contents(self.base, p.tokens(min(n, p.n_available)))
                out.append((n, sim.measure_added(contents, [self.target])[self.target]["bytes_per_token"]))
        else:
            for n in points:
                rows, _, _ = self.rows_at(method, n, [self.target])
                nbytes = sum(len(s.encode("utf-8")) for s in self.texts[self.target])
                out.append((n, nbytes / max(1, sum(map(len, rows[self.target])))))
        return out

    def merge_tree(self, method: str, n: int, token: str) -> dict:
        """How a new token is built: appended merges over the base model's segmentation (ignore_merges off).

        Nodes: {"token", "text", "new", "children"}; leaves are base tokens. `reachable` says whether the
        root is the token itself.
        """
        p = self.plans[method]
        table = MergeTable(p.merges(min(n, p.n_available)))
        extra = tuple(_single_chars(self.base, p.all_tokens()))
        base = self.base
        leaves = [x.value for x in self.stt_tokenize(extra)(token)]
        _final, events = table.run(leaves)

        def node(s: str, children: list[dict], rank: int | None = None) -> dict:
            out = {"token": s, "text": base.readable(s), "new": bool(children) and s not in base.vocab}
            if children:
                out["rank"] = rank
            out["children"] = children
            return out

        nodes = fold_merges(
            [node(s, []) for s in leaves],
            events,
            lambda a, b, ev: node(table.symbols[ev[2]], [a, b], ev[3] + 1),
        )
        if len(nodes) == 1 and nodes[0]["token"] == token:
            root = nodes[0]
            root["reachable"] = True
            return root
        return {
            "token": token,
            "text": base.readable(token),
            "new": True,
            "reachable": False,
            "children": nodes,
        }
