"""Extension methods: each turns a base tokenizer and a list of new tokens into an extended tokenizer.

Continued BPE training (Purason, Chizhov, Yamshchikov & Fishel, *Teaching Old Tokenizers New Words: Efficient
Tokenizer Adaptation for Pre-trained Models*, arXiv 2512.03989, 2025, §3.1) vs naive extension. Every method
returns an :class:`Extension`: a new `LoadedTokenizer` built with `LoadedTokenizer.from_document`, plus the
added tokens:

* ``continued`` — the merges of :func:`analysis.training.continue_training`, appended in learned order;
* ``regen`` — naive: the first N tokens of an auxiliary tokenizer (trained with the `tokenizers` trainer on
  the same text, same normalizer/pre-tokenizer/alphabet) that the base lacks, with merges regenerated from
  token priorities (`generate_merges` semantics: every split into two vocabulary tokens, ordered by the new
  token's rank, then longer left part first);
* ``merges`` — naive: the same tokens, with the auxiliary tokenizer's merge list appended (merges whose
  parts and result are all in the combined vocabulary and that the base does not have);
* ``add-tokens`` — naive: the same tokens as `added_tokens` entries (what `tokenizer.add_tokens` does);
* ``wordpiece`` — BERT-style WordPiece: the auxiliary WordPiece vocabulary's non-overlapping tokens appended in
  index order (Kim, *Exploring the Effects of Tokenizer Extension on Domain-specific Finetuning of Language
  Models*, MA thesis, Seoul National University, 2025, Alg. 7).

New ids start after every existing id (model and added), so special tokens and post-processor ids keep their
values.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import tokenizers
from tokenizers import pre_tokenizers, trainers

from ..cache import memoize
from ..errors import UnsupportedTokenizerError
from ..export import sync_post_processor
from ..tokenizer import SPIECE_UNDERLINE, LoadedTokenizer, added_token_entry, bpe_model, parse_merges
from ..training import training_mode

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


@memoize(maxsize=5)
def _merge_set(base: LoadedTokenizer) -> frozenset:
    """The base merges as a frozenset (cached per tokenizer content)."""
    return frozenset(base.merges)


def filter_merges(
    base: LoadedTokenizer, new_tokens: Sequence[str], candidates: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Keep (a, b) only if a, b and a+b are in the combined vocabulary and the base lacks the merge."""
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
    """Naive extension with regenerated merges (`generate_merges` semantics, see :func:`regen_merges`)."""
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
    """WordPiece extension (Kim 2025, Alg. 7): append non-overlapping tokens in order with the next ids."""
    if base.model_type != "WordPiece":
        raise UnsupportedTokenizerError(
            f"the WordPiece method needs a WordPiece tokenizer; {base.name} is {base.model_type}"
        )
    return append_to_model(base, tokens, [], "wordpiece")
