"""Extension methods: each turns a base tokenizer and a list of new tokens into an extended tokenizer.

Continued BPE training (Purason, Chizhov, Yamshchikov & Fishel, *Teaching Old Tokenizers New Words: Efficient
Tokenizer Adaptation for Pre-trained Models*, arXiv 2512.03989, 2025, §3.1) vs naive extension. Every method
returns an :class:`Extension`: a new `LoadedTokenizer` built with `LoadedTokenizer.from_document`, plus the
added tokens:

* ``continued`` — the merges of :func:`analysis.bpe.training.continue_training`, appended in learned order;
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

The auxiliary ("supplement") tokenizer of the naive methods is trained with the `tokenizers` BpeTrainer, or —
for byte-level bases whose text spans several languages — the parity-aware BpeTrainer
(:func:`analysis.bpe.parity.train_parity_bpe`). The WordPiece supplement is learned by the project's one BPE
trainer core (:func:`analysis.bpe.trainer.learn`, word-initial pieces marked, continuation pieces prefixed
``##``: what the `tokenizers` WordPieceTrainer learns) because that trainer breaks ties between equally frequent
pairs deterministically and the `tokenizers` WordPieceTrainer does not (its vocabulary changes run to run).
A `min_frequency` threshold (Kim 2025, §4.2) stops the supplement's merges at pairs rarer than it, so the
threshold, not only N, decides how many tokens are added.

New ids start after every existing id (model and added), so special tokens and post-processor ids keep their
values.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import tokenizers
from tokenizers import pre_tokenizers, trainers

from analysis.bpe.parity import VARIANTS, train_parity_bpe
from analysis.bpe.trainer import learn
from analysis.bpe.training import count_pretokens, training_mode
from analysis.core.cache import memoize
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.tokenizer.alphabets import SPIECE_UNDERLINE
from analysis.tokenizer.document import added_token_entry, bpe_model, parse_merges
from analysis.tokenizer.export import sync_post_processor
from analysis.tokenizer.tokenizer import LoadedTokenizer

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
        if t in vocab or t in added_contents:  # a token added earlier in this loop is in `vocab` already
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
    """An auxiliary ("supplement") tokenizer trained from scratch on the extension text.

    `trainer` is ``bpe`` (the `tokenizers` BpeTrainer), ``parity`` (its parity-aware trainer) or ``wordpiece``
    (the project's trainer core, deterministic); `languages` the per-language corpora of a parity-aware run.
    """

    kind: str
    tokens: list[str]
    merges: list[tuple[str, str]]
    seconds: float = 0.0
    vocab_size: int = 0
    min_frequency: int = 0
    trainer: str = "bpe"
    languages: tuple[str, ...] = ()


@dataclass
class ParityText:
    """The text of a parity-aware auxiliary tokenizer: one corpus per language (at least two) and, optionally,
    parallel development sets in the same order (else the trainer balances the training totals)."""

    corpora: dict[str, list[str]]
    dev: dict[str, list[str]] | None = None
    variant: str = "base"

    def __post_init__(self) -> None:
        if len(self.corpora) < 2:
            raise DataError(
                "parity-aware training balances languages: it needs text in at least two languages "
                f"(one corpus each); got {len(self.corpora)}"
            )
        if self.variant not in VARIANTS:
            raise DataError(
                f"unknown parity-aware variant {self.variant!r}; choose one of {', '.join(VARIANTS)}"
            )
        if self.dev is not None and list(self.dev) != list(self.corpora):
            raise DataError("the development sets must name the same languages as the corpora, in order")

    @property
    def languages(self) -> tuple[str, ...]:
        """The language labels, in order."""
        return tuple(self.corpora)

    def lines(self) -> Iterable[str]:
        """Every training line (the plain trainer's text at equal content)."""
        for c in self.corpora.values():
            yield from c


def parity_applies(base: LoadedTokenizer) -> str | None:
    """Why the parity-aware auxiliary tokenizer does not apply to `base` (None when it does)."""
    if base.model_type != "BPE" or not base.is_byte_level:
        return (
            f"{base.name} is {base.model_type} ({base.flavour}): the parity-aware trainer learns a byte-level BPE "
            "and needs a byte-level base"
        )
    return None


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


#: Marks the first piece of a word while the WordPiece supplement is learned (continuation pieces are bare).
_WORD_START = "\ue000"


def train_wordpiece_supplement(
    base: LoadedTokenizer, units: Iterable[str], vocab_size: int, *, min_frequency: int = 0
) -> AuxVocab:
    """The WordPiece supplement (Kim 2025, Alg. 7) learned deterministically by the project's trainer core.

    What the `tokenizers` WordPieceTrainer learns — BPE over the base's pre-tokens, every piece after a word's
    first prefixed ``##``, merges by pair frequency — with ties going to the lexicographically smallest pair:
    the same text always gives the same vocabulary. Order: word-initial characters, then ``##`` characters
    (each by code point), then the merged pieces in learned order; `vocab_size` bounds the total.
    """
    t0 = time.perf_counter()
    prefix = base.continuing_subword_prefix or "##"
    counts, _, _ = count_pretokens(base, units)
    words: Counter = Counter()
    for w, c in counts.items():
        if w and _WORD_START not in w:
            words[(_WORD_START + w[0], *w[1:])] += c
    initial = sorted({w[0] for w in words})
    cont = sorted({ch for w in words for ch in w[1:]})
    alphabet = initial + cont
    known = set(alphabet)
    n_merges = max(0, vocab_size - len(alphabet))
    run = learn(
        words.items(), n_merges, known=known.__contains__, alphabet=alphabet, min_frequency=min_frequency
    )

    def piece(s: str) -> str:
        return s[len(_WORD_START) :] if s.startswith(_WORD_START) else prefix + s

    tokens = [piece(s) for s in alphabet]
    seen = set(tokens)
    for p in run.pops:
        t = piece(p.token)
        if t not in seen:
            seen.add(t)
            tokens.append(t)
    return AuxVocab(
        "wordpiece", tokens, [], time.perf_counter() - t0, vocab_size, min_frequency, trainer="wordpiece"
    )


def _vocab_and_merges(tk: tokenizers.Tokenizer) -> tuple[list[str], list[tuple[str, str]]]:
    d = json.loads(tk.to_str())
    vocab = d["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    return tokens, parse_merges(d["model"].get("merges") or [])


def train_auxiliary(
    base: LoadedTokenizer,
    units: Iterable[str],
    vocab_size: int,
    *,
    max_token_length: int | None = None,
    min_frequency: int = 0,
    parity: ParityText | None = None,
) -> AuxVocab:
    """Train a BPE (or, for WordPiece bases, WordPiece) tokenizer from scratch on the text, base's pipeline.

    `min_frequency`: pairs rarer than this are never merged (the supplement may then hold fewer than
    `vocab_size` tokens). `parity`: train the parity-aware BPE on its per-language corpora instead of `units`
    (byte-level bases only; :func:`parity_applies`).
    """
    t0 = time.perf_counter()
    if base.model_type == "WordPiece":
        return train_wordpiece_supplement(base, units, vocab_size, min_frequency=min_frequency)
    if parity is not None:
        why = parity_applies(base)
        if why:
            raise UnsupportedTokenizerError(why)
        tk = train_parity_bpe(
            parity.corpora,
            vocab_size,
            dev=parity.dev,
            variant=parity.variant,
            template=base,
            min_frequency=min_frequency,
        )
        tokens, merges = _vocab_and_merges(tk)
        return AuxVocab(
            "bpe",
            tokens,
            merges,
            time.perf_counter() - t0,
            vocab_size,
            min_frequency,
            trainer="parity",
            languages=parity.languages,
        )
    norm, pre, alphabet = _aux_pipeline(base)
    sp = base.is_sentencepiece_style and not base.is_byte_level
    mtl = max_token_length or (16 if sp else None)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=alphabet,
        max_token_length=mtl,
        min_frequency=min_frequency,
    )
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": norm,
        "pre_tokenizer": pre,
        "post_processor": None,
        "decoder": None,
        "model": bpe_model(),
    }
    aux = tokenizers.Tokenizer.from_str(json.dumps(doc))
    aux.train_from_iterator(units, trainer=trainer)
    tokens, merges = _vocab_and_merges(aux)
    return AuxVocab("bpe", tokens, merges, time.perf_counter() - t0, vocab_size, min_frequency)


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
    base: LoadedTokenizer,
    units: Callable[[], Iterable[str]],
    n: int,
    *,
    max_token_length: int | None = None,
    min_frequency: int = 0,
    parity: ParityText | None = None,
) -> AuxVocab:
    """Train an auxiliary tokenizer large enough to give n new tokens (grows the size up to 3 times; stops
    early when the text, or the `min_frequency` threshold, has no more to give)."""
    size = 256 + 2 * n if base.model_type != "WordPiece" else 1000 + 2 * n
    aux = None
    for _ in range(4):
        aux = train_auxiliary(
            base,
            units() if parity is None else (),
            size,
            max_token_length=max_token_length,
            min_frequency=min_frequency,
            parity=parity,
        )
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
