"""R-BPE token reuse (Hamdan, Al Mraikhat, Zaraket, "R-BPE: Improving BPE-Tokenizers with Token Reuse", EMNLP
2025), implemented from the paper.

Why one file (about 800 lines): the protections, the target BPE, the id maps and ReuseTokenizer's
encode/decode/save/load are one pipeline over the same plan; the vocabulary classes (classes.py), the measures
(measures.py) and the model side (model.py) live apart.

Pipeline: classify the vocabulary by Unicode *blocks* → choose reusable classes (not preserved, smallest first
until the threshold h) → drop training samples that contain reusable characters → train a byte-level BPE on
the target-language segments → map every new token to an old id (same string → same id, otherwise a reusable
id, both in sorted order) → encode target-script segments with the new tokenizer and everything else with the
old one → decode by grouping ids by "mapped", with the 1–4-token window pass for partial UTF-8.

The model's embedding matrix keeps its size: every id the reuse tokenizer emits is an old id.

**The class rule.** A token's class comes from its standalone decoding, stripped of surrounding whitespace:
every character gets the label of its Unicode block (blocks named Arabic / CJK / Greek / Latin … merge into
``Arabic_merged`` / ``CJK_merged`` / ``Greek_merged`` / ``Latin_merged``; General Punctuation and ``▁`` are
skipped; a character outside the block table is ``Unknown``; a partial UTF-8 byte decodes to U+FFFD, block
``Specials``). One label → that class. Several labels: when every label is Hiragana, Katakana or CJK_merged,
CJK_merged is dropped and Hiragana + Katakana together make ``Katakana_Hiragana`` (so ``の人`` is Hiragana and
``カタカナ漢字`` is Katakana); otherwise the sorted labels joined by ``_`` make a mixed class
(``Cyrillic_Latin_merged``). Two rule sets decide which block table is used and which classes may be reused:

* ``paper`` (default) — the R-BPE code as first released (September 2025), which produced the paper's Tables 1
  and 2: the 122 blocks of its table (Unicode 4.0 names; ranges from :mod:`analysis.core.unicode`, identical for
  these blocks; C0/C1 controls and every later block are ``Unknown``); a class is eligible when its name contains
  one of 26 script keywords (:data:`PAPER_SCRIPT_KEYWORDS`) and is excluded when it contains the name of the
  target or a preserved script (preserving CJK preserves Hangul, Hiragana, Katakana, Bopomofo … too). This
  reproduces Llama-3.1's 16,632 reusable ids in 35 classes (Arabic target, Latin + Greek preserved) and every
  row of Table 2, and Qwen3's 41,752 ids in 40 classes (Table 1).
* ``unicode17`` — the rules of the later release: every Unicode 17 block (:func:`analysis.core.unicode.blocks`); a
  class is eligible when its name contains a Unicode script name (:func:`analysis.core.unicode.scripts`, minus
  Common / Inherited / Braille) or CJK / Dingbats, and is excluded when one of its blocks belongs to the target
  or a preserved script. Scripts missing from the first list (Ethiopic, Gurmukhi, Gujarati, Lao, Syriac …) and
  blocks added after Unicode 4.0 become reusable: Qwen3 gets 42,543 ids in 92 classes, Llama-3.1 still 16,632.

Differences from the reference (deliberate): the id assignment is sorted (deterministic), the excluded
"special + byte" ids are derived from the tokenizer (no hard-coded ≤263), the new tokenizer is trained only on
the target-script segments it will see at encode time, and the paper's hand-made Arabic normalisation map is
not applied (its rules are not published).
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import tokenizers
from tokenizers.trainers import BpeTrainer

from analysis.bpe.parity import train_parity_bpe
from analysis.core import paths
from analysis.core.cache import DiskCache, memoize
from analysis.core.inputs import check_not_special, decode_utf8, parse_json, read_file
from analysis.core.progress import Progress, report
from analysis.core.unicode import blocks, script
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.texts import flores
from analysis.tokenizer.export import folder_files, zip_files
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import BYTE_TO_CHAR, LoadedTokenizer, bpe_model

from .classes import (
    DEFAULT_RULES,
    REPLACEMENT,
    ReusePlan,
    VocabClasses,
    choose_reusable,
    classify_vocab,
    standalone_text,
)

MAPPING_FILE = "rbpe_mapping.json"
FORMAT = "tokenizer-lab/r-bpe"

# ------------------------------------------------------------------------------------------ protection
#: Protections: `symbols` keeps ids whose text is only Common/Inherited-script characters (punctuation, digits and
#: symbols shared by many scripts: the Devanagari danda used by Oriya and Gurmukhi, ✔, ❤, 。); `usage` keeps ids
#: that the FLORES training lines of a kept-script language (neither target nor reused) encode to.
PROTECTIONS = ("symbols", "usage")
_SHARED_SCRIPTS = frozenset({"Common", "Inherited"})


def is_shared_symbol(text: str) -> bool:
    """Whether a token's text (stripped) is made only of characters every script shares (Script = Common or
    Inherited, no U+FFFD of a partial character)."""
    core = text.strip()
    return bool(core) and REPLACEMENT not in core and all(script(ch) in _SHARED_SCRIPTS for ch in core)


def shared_symbol_ids(tok: LoadedTokenizer, ids: Iterable[int]) -> list[int]:
    """The ids among `ids` whose standalone text is a shared symbol (:func:`is_shared_symbol`)."""
    shared = all_shared_symbol_ids(tok)
    return sorted(i for i in set(ids) if i in shared)


@memoize(maxsize=4)
def all_shared_symbol_ids(tok: LoadedTokenizer) -> frozenset[int]:
    """Every id of the vocabulary (added tokens included) whose standalone text is a shared symbol; cached per
    tokenizer, so any target, threshold or preserved set reads it instead of testing the tokens again."""
    return frozenset(i for i, t in tok.id_to_token.items() if is_shared_symbol(standalone_text(tok, t)))


def language_role(lines: Sequence[str], target_blocks: Iterable[str], reusable_blocks: Iterable[str]) -> str:
    """``target``, ``reused`` or ``kept``: where most letters of a language's lines are (target blocks, reusable
    blocks, elsewhere)."""
    tre, rre = re.compile(char_class(target_blocks)), re.compile(char_class(reusable_blocks))
    letters = in_target = in_reused = 0
    for ch, n in Counter("".join(lines)).items():  # each distinct character once (counted in C)
        if ch.isalpha():
            letters += n
            if tre.match(ch):
                in_target += n
            elif rre.match(ch):
                in_reused += n
    if letters and in_target * 2 > letters:
        return "target"
    if letters and in_reused * 2 > letters:
        return "reused"
    return "kept"


def usage_ids(tok: LoadedTokenizer, plan: ReusePlan, ids: Iterable[int]) -> list[int]:
    """The ids among `ids` that the FLORES training lines (:func:`analysis.texts.flores.split_lines`) of the kept-script
    languages encode to under the original tokenizer (none when FLORES is not available); cached."""
    return list(
        _usage_ids(tok, tuple(plan.target_blocks), tuple(plan.reusable_blocks), tuple(sorted(set(ids))))
    )


#: The usage protection's ids kept on disk (one small document per tokenizer, blocks, ids and FLORES texts): encoding
#: the training lines of every kept-script language is most of a protected build's time before the training, and a
#: second session, a rerun or the CLI after the page reads them back. Bump when the rule changes.
USAGE_VERSION = 1
_USAGE = DiskCache("reuse-usage", USAGE_VERSION)


@memoize(maxsize=8)
def _usage_ids(
    tok: LoadedTokenizer,
    target_blocks: tuple[str, ...],
    reusable_blocks: tuple[str, ...],
    ids: tuple[int, ...],
) -> tuple[int, ...]:
    codes = flores.available_codes()
    head = f"{tok.content_hash}|{target_blocks}|{reusable_blocks}|{flores.FLORES_TRAIN_LINES}"
    h = hashlib.sha256(head.encode())
    h.update(",".join(map(str, ids)).encode())
    h.update((flores.dataset().texts_key(codes) if codes else "").encode())
    key = h.hexdigest()[:32]
    stored = _USAGE.get(key)
    wanted = set(ids)
    if isinstance(stored, list) and all(type(i) is int and i in wanted for i in stored):
        return tuple(stored)
    found: set[int] = set()
    for code in codes:
        train = flores.split_lines(code)[0]
        if language_role(train[:50], target_blocks, reusable_blocks) == "kept":
            for e in tok.tokenizer.encode_batch_fast(train, add_special_tokens=False):  # the ids, no offsets
                found.update(wanted.intersection(e.ids))
    out = tuple(sorted(found))
    # best effort, as every store: a full or read-only one costs the next caller the time
    _USAGE.put(key, list(out))
    return out


def protected_ids(
    tok: LoadedTokenizer,
    vc: VocabClasses,
    target: str,
    preserved: Sequence[str],
    min_reusable: int,
    protect: Sequence[str],
) -> list[int]:
    """The ids the chosen protections (:data:`PROTECTIONS`) keep out of reuse, among the ids the unprotected plan
    would reuse."""
    bad = [p for p in protect if p not in PROTECTIONS]
    if bad:
        raise DataError(f"unknown protection {bad[0]!r}; choose from {', '.join(PROTECTIONS)}")
    if not protect:
        return []
    plan = choose_reusable(vc, target, preserved, min_reusable)
    out: set[int] = set()
    if "symbols" in protect:
        out.update(shared_symbol_ids(tok, plan.reusable_ids))
    if "usage" in protect:
        out.update(usage_ids(tok, plan, plan.reusable_ids))
    return sorted(out)


# ------------------------------------------------------------------------------------------ segmenting
def char_class(block_names: Iterable[str]) -> str:
    """A regex character class matching every code point of the given blocks."""
    names = set(block_names)
    parts = [
        f"\\U{b.start:08x}-\\U{b.end:08x}" if b.start != b.end else f"\\U{b.start:08x}"
        for b in blocks()
        if b.name in names
    ]
    return "[" + "".join(parts) + "]" if parts else "[^\\s\\S]"


def segment(text: str, target_re: re.Pattern) -> list[tuple[str, bool]]:
    """Split text into (segment, is_target) runs; whitespace joins the current run (leading whitespace the first)."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in target_re.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], False))
        out.append((m.group(), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    if len(out) >= 2 and not out[0][1] and out[1][1] and not out[0][0].strip():
        out[:2] = [(out[0][0] + out[1][0], True)]
    return out


def target_regex(target_blocks: Iterable[str]) -> re.Pattern:
    """Regex of one target segment: a target char followed by target chars and whitespace."""
    cc = char_class(target_blocks)
    return re.compile(f"{cc}(?:{cc}|\\s)*")


# -------------------------------------------------------------------------------------------- data
def clean_texts(texts: Iterable[str], reusable_blocks: Iterable[str]) -> Iterator[str]:
    """Drop every sample that contains a character of a reusable block (step 3)."""
    bad = re.compile(char_class(reusable_blocks))
    for t in texts:
        if not bad.search(t):
            yield t


def wordfreq_texts(path: str | Path, scale: float = 1000.0, max_words: int | None = 200_000) -> Iterator[str]:
    """Lines of space-separated words from a `word<TAB>count` list, each word repeated ≈ count/scale times (≥ 1)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(check_not_special(path), "rt", encoding="utf-8") as fh:
        for k, line in enumerate(fh):
            if max_words is not None and k >= max_words:
                break
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2 or not parts[0].strip():
                continue
            try:
                n = max(1, round(float(parts[1]) / scale))
            except ValueError:
                continue
            w = parts[0].strip()
            while n > 0:
                k2 = min(n, 64)
                yield " " + " ".join([w] * k2)
                n -= k2


def corpus_files(lang: str) -> list[Path]:
    """The shared corpora of one language (`$TOKLAB_ASSETS/corpora/text`: prose, UI strings, word frequencies)."""
    root = paths.shared_corpora() / "text"
    names = (f"{lang}.txt.gz", f"{lang}.ui.txt.gz", f"{lang}.wordfreq.tsv.gz")
    return [root / n for n in names if (root / n).is_file()]


def target_training_texts(
    lang: str = "arb_Arab",
    *,
    flores_train: bool = True,
    corpora: bool = True,
    max_words: int | None = 200_000,
    extra: Iterable[str] = (),
) -> list[str]:
    """Target-language training text: FLORES train split (:func:`analysis.texts.flores.split_lines`), the shared
    corpora (:func:`corpus_files`; a word-frequency list becomes lines of repeated words, at most `max_words`
    words) and `extra` lines (files, uploads), in that order."""
    texts: list[str] = []
    if flores_train:
        texts += flores.split_lines(lang)[0]
    if corpora:
        for p in corpus_files(lang):
            if p.name.endswith(".wordfreq.tsv.gz"):
                if max_words is None or max_words > 0:
                    texts += list(wordfreq_texts(p, max_words=max_words))
                continue
            with gzip.open(p, "rt", encoding="utf-8") as fh:
                texts += [ln.rstrip("\n") for ln in fh if ln.strip()]
    texts += [t for t in extra if t.strip()]
    if not texts:
        raise DataError(
            f"no training text for {lang}: choose FLORES lines, the shared corpora or your own text"
        )
    return texts


# ------------------------------------------------------------------------------------------ training
def _check_supported(tok: LoadedTokenizer) -> None:
    if tok.model_type != "BPE" or not tok.is_byte_level:
        raise UnsupportedTokenizerError(
            f"{tok.name}: R-BPE token reuse needs a byte-level BPE tokenizer (GPT-2/Llama-3/Qwen style); "
            f"this one is {tok.flavour}"
        )


#: Byte values that never occur in UTF-8 text (C0, C1, F5–FF): left out of the new tokenizer's alphabet, whose
#: training and encoding texts are always UTF-8, so no vocabulary slot (and no reused id) is spent on them.
NON_UTF8_BYTES = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])


def utf8_alphabet() -> list[str]:
    """The byte-level alphabet minus :data:`NON_UTF8_BYTES` (243 characters)."""
    return [BYTE_TO_CHAR[b] for b in range(256) if b not in NON_UTF8_BYTES]


def train_target_bpe(
    tok: LoadedTokenizer, segments: Iterable[str], vocab_size: int, *, min_frequency: int = 2
) -> tokenizers.Tokenizer:
    """Train the new byte-level BPE (old normalizer/pre-tokenizer/decoder, the UTF-8 byte alphabet, old specials)
    (step 4)."""
    _check_supported(tok)
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": tok.normalizer,
        "pre_tokenizer": tok.pre_tokenizer,
        "post_processor": None,
        "decoder": tok.decoder,
        "model": bpe_model(),
    }
    new = tokenizers.Tokenizer.from_str(json.dumps(doc))
    specials = [a.content for a in sorted(tok.added_tokens, key=lambda a: a.id) if a.special]
    trainer = BpeTrainer(
        vocab_size=vocab_size + len(specials),
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=utf8_alphabet(),
        show_progress=False,
    )
    new.train_from_iterator(segments, trainer=trainer)
    return new


TRAINERS = ("bpe", "parity")


def _train_parity_target(
    tok: LoadedTokenizer,
    plan: ReusePlan,
    segs: list[str],
    langs: Sequence[str] | None,
    train_lang: str | None,
    min_frequency: int,
) -> tuple[tokenizers.Tokenizer, list[str]]:
    """Parity-aware target tokenizer: one corpus per target-script FLORES language (module docstring)."""
    tre = target_regex(plan.target_blocks)
    if langs is None:
        langs = [
            c
            for c in flores.available_codes()
            if language_role(flores.split_lines(c)[0][:50], plan.target_blocks, plan.reusable_blocks)
            == "target"
        ]
    if not langs:
        raise DataError(
            "no FLORES language is written in the target script: parity-aware training needs some"
        )
    langs = list(dict.fromkeys(langs))
    if train_lang in langs:
        langs.remove(train_lang)
        langs.insert(0, train_lang)
    bad = re.compile(char_class(plan.reusable_blocks))

    def target_segments(lines: Sequence[str]) -> list[str]:
        return [m.group() for t in lines if not bad.search(t) for m in tre.finditer(t)]

    corpora, dev = [], []
    for k, code in enumerate(langs):
        first = flores.split_lines(code)[0]
        corpora.append((segs if k == 0 else []) + target_segments(first[:700]))
        dev.append(target_segments(first[700:]))
    specials = [a.content for a in sorted(tok.added_tokens, key=lambda a: a.id) if a.special]
    new = train_parity_bpe(
        corpora,
        plan.reusable_count + len(specials),
        dev=dev,
        template=tok,
        min_frequency=min_frequency,
        special_tokens=specials,
    )
    return new, list(langs)


def build_id_maps(
    tok: LoadedTokenizer, new: tokenizers.Tokenizer, reusable_ids: Sequence[int]
) -> tuple[dict[int, int], list[int]]:
    """new id → old id (same string → same id; new-only tokens, sorted, → free reusable ids, sorted) (step 5).

    Returns (new_to_old, reused old ids)."""
    old_ids = dict(tok.vocab)
    for a in tok.added_tokens:
        old_ids[a.content] = a.id
    common: dict[int, int] = {}
    new_only: list[int] = []
    for token, nid in sorted(new.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1]):
        if token in old_ids:
            common[nid] = old_ids[token]
        else:
            new_only.append(nid)
    taken = set(common.values())
    free = sorted(set(reusable_ids) - taken)
    if len(new_only) > len(free):
        raise DataError(f"{len(new_only)} new tokens but only {len(free)} reusable ids")
    new_to_old = dict(common)
    reused = free[: len(new_only)]
    new_to_old.update(zip(new_only, reused))
    return new_to_old, reused


# ------------------------------------------------------------------------------------------ tokenizer
def _check_ids(ids: list[Any]) -> None:
    """DataError naming the first item of `ids` that is not a whole number ≥ 0 (a bool is not one): one numpy pass
    for the usual list of ints, the item-by-item search only to name the bad one."""
    if not ids:
        return
    arr = np.asarray(ids)
    if arr.ndim == 1 and arr.dtype.kind in "iu" and arr.min() >= 0:
        return
    bad = next((i for i in ids if isinstance(i, bool) or not isinstance(i, Integral) or i < 0), None)
    if bad is not None:
        raise DataError(f"{bad!r} is not a token id (ids are whole numbers ≥ 0)")


@dataclass
class ReuseTokenizer:
    """An R-BPE tokenizer: old + new tokenizer and the id maps; emits only old ids."""

    old: LoadedTokenizer
    new: tokenizers.Tokenizer
    new_to_old: dict[int, int]
    target_blocks: list[str]
    replacement_ids: frozenset[int]
    reused_ids: frozenset[int]
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.old_to_new = {o: n for n, o in self.new_to_old.items()}
        self._target_re = target_regex(self.target_blocks)
        size = max(self.new_to_old, default=-1) + 1
        self._n2o = [self.new_to_old.get(i, -1) for i in range(size)]
        self._fast: tuple[list[bytes | None], frozenset[int]] | bool | None = None
        self._reused_mapped = self.reused_ids <= self.old_to_new.keys()  # what `_whole_text` relies on

    def _byte_table(self) -> tuple[list[bytes | None], frozenset[int]]:
        """Per old id, the bytes it decodes to under R-BPE (a reused id: its new token's bytes), and the added ids.

        Only for a plain ByteLevel decoder, where decoding is the UTF-8 decoding of the tokens' bytes."""
        if not isinstance(self._fast, tuple):
            old = self.old
            table: list[bytes | None] = [None] * (max(old.id_to_token, default=-1) + 1)
            for i, t in old.id_to_token.items():
                table[i] = old.token_bytes(t)
            new_tokens = {i: t for t, i in self.new.get_vocab(with_added_tokens=False).items()}
            for o in self.reused_ids:
                table[o] = old.token_bytes(new_tokens[self.old_to_new[o]])
            self._fast = (table, old.added_ids)
        return self._fast

    @property
    def vocab_size(self) -> int:
        """Vocabulary size of the model (the old tokenizer's, unchanged)."""
        return self.old.vocab_size

    # ---------------------------------------------------------------- encode
    def segments(self, text: str) -> list[tuple[str, bool]]:
        """The (segment, is_target) runs of a text."""
        return segment(text, self._target_re)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Encode texts (no special tokens): target segments via the new tokenizer + map, the rest via the old."""
        segs = [self.segments(t) for t in texts]
        tgt = [s for ss in segs for s, is_t in ss if is_t]
        oth = [s for ss in segs for s, is_t in ss if not is_t]
        n2o = self._n2o
        tgt_ids = iter(
            [[n2o[i] for i in e.ids] for e in self.new.encode_batch_fast(tgt, add_special_tokens=False)]
        )
        oth_ids = iter([e.ids for e in self.old.tokenizer.encode_batch_fast(oth, add_special_tokens=False)])
        out = []
        for ss in segs:
            ids: list[int] = []
            for _, is_t in ss:
                ids.extend(next(tgt_ids) if is_t else next(oth_ids))
            out.append(ids)
        return out

    def encode_batch_tagged(self, texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """Per text: the (old) ids, and per id the new tokenizer's id it stands for (-1 where the old tokenizer
        encoded it)."""
        segs = [self.segments(t) for t in texts]
        tgt = [s for ss in segs for s, is_t in ss if is_t]
        oth = [s for ss in segs for s, is_t in ss if not is_t]
        n2o = self._n2o
        tgt_ids = iter([e.ids for e in self.new.encode_batch_fast(tgt, add_special_tokens=False)])
        oth_ids = iter([e.ids for e in self.old.tokenizer.encode_batch_fast(oth, add_special_tokens=False)])
        out = []
        for ss in segs:
            ids: list[int] = []
            tags: list[int] = []
            for _, is_t in ss:
                if is_t:
                    got = next(tgt_ids)
                    ids.extend(n2o[i] for i in got)
                    tags.extend(got)
                else:
                    got = next(oth_ids)
                    ids.extend(got)
                    tags.extend([-1] * len(got))
            out.append((ids, tags))
        return out

    def encode(self, text: str) -> list[int]:
        """Encode one text (no special tokens)."""
        return self.encode_batch([text])[0]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]], list[bool]]:
        """Ids, character offsets into text, and whether each id came from the new tokenizer."""
        ids: list[int] = []
        offs: list[tuple[int, int]] = []
        from_new: list[bool] = []
        pos = 0
        for seg, is_t in self.segments(text):
            enc = (self.new if is_t else self.old.tokenizer).encode(seg, add_special_tokens=False)
            for i, (a, b) in zip(enc.ids, enc.offsets):
                ids.append(self._n2o[i] if is_t else i)
                offs.append((pos + a, pos + b))
                from_new.append(is_t)
            pos += len(seg)
        return ids, offs, from_new

    # ---------------------------------------------------------------- decode
    def _dec_old(self, ids: Sequence[int], skip: bool) -> str:
        fast = self._fast_text(ids, False)
        return fast if fast is not None else self.old.tokenizer.decode(list(ids), skip_special_tokens=skip)

    def _dec_new(self, ids: Sequence[int], skip: bool) -> str:
        fast = self._fast_text(ids, True)
        if fast is not None:
            return fast
        return self.new.decode([self.old_to_new[i] for i in ids], skip_special_tokens=skip)

    def _fast_text(self, ids: Sequence[int], mapped: bool) -> str | None:
        """What the Rust decoder gives for one run, from the tokens' bytes (a plain ByteLevel decoder decodes the
        concatenated bytes as UTF-8); None when that does not apply (another decoder, an added, unknown or — in an
        old-tokenizer run — reused id)."""
        if self._fast is False:
            return None
        dec = self.old.decoder
        if self._fast is None and not (isinstance(dec, dict) and dec.get("type") == "ByteLevel"):
            self._fast = False
            return None
        table, added = self._byte_table()
        n = len(table)
        reused = () if mapped else self.reused_ids
        parts = []
        for t in ids:
            b = table[t] if 0 <= t < n and t not in added and t not in reused else None
            if b is None:
                return None
            parts.append(b)
        return b"".join(parts).decode("utf-8", errors="replace")

    def _join(self, segs: list[list[Any]], skip: bool) -> str:
        return "".join(self._dec_new(s, skip) if m else self._dec_old(s, skip) for m, s in segs)

    def _runs(self, ids: list[int]) -> list[list[Any]]:
        """The first pass's runs: [mapped, ids] for each maximal run of mapped / not mapped ids."""
        o2n = self.old_to_new
        segs: list[list[Any]] = []
        for t in ids:
            m = t in o2n
            if segs and segs[-1][0] == m:
                segs[-1][1].append(t)
            else:
                segs.append([m, [t]])
        return segs

    def _whole_bytes(self, ids: list[int]) -> tuple[bytes, list[bytes]] | None:
        """All the line's bytes and each id's, where decoding provably works on bytes: a plain ByteLevel decoder,
        every id with its bytes, no added id, every reused id mapped (so an old-tokenizer run never holds one and
        each run decodes its ids' table bytes); None otherwise."""
        if not ids or self._fast_text(ids[:1], True) is None or min(ids) < 0:
            return None
        table, added = self._byte_table()
        try:
            parts = [table[t] for t in ids]
            whole = b"".join(parts)  # a TypeError on None: an id without bytes
        except (IndexError, TypeError):
            return None
        if not added.isdisjoint(ids) or not self._reused_mapped:
            return None
        return whole, parts  # type: ignore[return-value]

    def round_trips(self, ids: Sequence[int], text: str) -> bool:
        """Whether :meth:`decode` gives `text` back from `ids` — without decoding where it works on bytes.

        Where decoding works on bytes (:meth:`_whole_bytes`), every run decodes its own bytes with U+FFFD for an
        invalid or split character, so the decoded text is either the UTF-8 decoding of all the ids' bytes (no run
        wrote U+FFFD) or holds a U+FFFD. Hence for a text without U+FFFD it comes back exactly when its UTF-8 bytes
        are the ids' bytes and no segment splits a character (:meth:`_segments_whole`, on the tokens' first bytes).
        Otherwise it decodes and compares."""
        ids = list(ids)
        if REPLACEMENT not in text:
            got = self._whole_bytes(ids)
            if got is not None:
                return got[0] == text.encode("utf-8") and self._segments_whole(ids, got[1])
        return self._decode(ids) == text

    def _segments_whole(self, ids: list[int], parts: list[bytes]) -> bool:
        """Whether :meth:`decode` writes no U+FFFD for `ids` whose bytes `parts` join to valid UTF-8 without U+FFFD
        (the bytes of the text compared in :meth:`round_trips`) — on the tokens' first bytes alone, no decoding.

        Every segment decodes its own bytes and the segments' bytes concatenate to the text's, so the decoded text
        is the text exactly when every segment starts at a character's first byte: at a token whose first byte is
        not a continuation byte (`starts`; the end of the line is a boundary too). The first pass's segments are
        the runs; where one starts inside a character the window pass decides, and its test ("the segment's
        pending bytes and the window's decode strictly") is, on valid UTF-8 from a segment that started at a
        character, "the window ends at a character"; a window that opens a segment must start at one too. This
        mirrors :meth:`_window_segments_bytes` step by step (tested against decoding on random token sequences of
        FLORES lines, with the mapping's replacement ids and with others)."""
        if not all(parts):
            # a token without bytes: a segment could start inside a character and write nothing
            return REPLACEMENT not in self._decode(ids)
        starts = [b[0] & 0xC0 != 0x80 for b in parts]
        o2n = self.old_to_new
        n = len(ids)
        prev = ids[0] in o2n
        # the first pass: its runs decode the line unless one starts inside a character (then the window pass)
        for k in range(1, n):
            m = ids[k] in o2n
            if m is not prev and not starts[k]:
                break
            prev = m
        else:
            return True
        repl = self.replacement_ids
        # the current segment: mapped or not (None before the first); every segment so far started at a character
        # (one that does not ends the check: its text would hold U+FFFD)
        cur: bool | None = None
        i = 0
        while i < n:
            t = ids[i]
            if t in repl:
                accepted = 0
                all_mapped = True
                for w in range(1, 5):
                    if i + w > n:
                        break
                    if ids[i + w - 1] not in o2n:
                        all_mapped = False
                    side = self._window_side(ids[i : i + w], all_mapped, cur)
                    if side is None:
                        continue
                    joins, mapped = side
                    if (i + w == n or starts[i + w]) and (joins or starts[i]):
                        if not joins:
                            cur = mapped
                        accepted = w
                        break
                if accepted:
                    i += accepted
                    continue
            m = t in o2n
            if cur is None or cur is not m:
                if not starts[i]:
                    return False
                cur = m
            i += 1
        return True

    def _whole_text(self, ids: list[int]) -> str | bool | None:
        """The first pass of :meth:`decode` in one UTF-8 decoding, where it provably gives the same text; False
        when that text would hold U+FFFD from a split character; None when the shortcut does not apply.

        Decoding each run (mapped / not) on its own and joining equals decoding all the bytes at once exactly when
        the bytes are valid UTF-8 and every run starts at a character's first byte; otherwise some run decodes a
        partial character, i.e. the first pass holds U+FFFD and the window pass decides. It applies to a plain
        ByteLevel decoder and a line without added ids (an old-tokenizer run never holds a reused id, as every
        reused id is mapped)."""
        got = self._whole_bytes(ids)
        if got is None:
            return None
        whole, parts = got
        o2n = self.old_to_new
        prev = ids[0] in o2n
        pos = 0
        for t, b in zip(ids, parts):
            m = t in o2n
            if m is not prev and pos < len(whole) and whole[pos] & 0xC0 == 0x80:
                return False  # a run starts inside a character
            prev = m
            pos += len(b)
        try:
            return whole.decode("utf-8")
        except UnicodeDecodeError:
            return False

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Decode old ids: mapped runs via the new tokenizer, others via the old; window pass if U+FFFD appears.
        DataError for an id that is not a whole number ≥ 0 (the tokenizers library would raise OverflowError)."""
        ids = list(ids)
        _check_ids(ids)
        return self._decode(ids, skip_special_tokens)

    def _decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """:meth:`decode` of ids this object produced (no check: :meth:`round_trips` decodes encodings)."""
        whole = self._whole_text(ids)
        if isinstance(whole, str) and REPLACEMENT not in whole:  # the first pass's text, in one decoding
            return whole
        if whole is not None:  # the first pass would hold U+FFFD: the window pass decides
            return self._join(self._window_segments(ids, skip_special_tokens), skip_special_tokens)
        text = self._join(self._runs(ids), skip_special_tokens)
        if REPLACEMENT not in text:
            return text
        return self._join(self._window_segments(ids, skip_special_tokens), skip_special_tokens)

    def _window_side(
        self, window: Sequence[int], all_mapped: bool, cur: bool | None
    ) -> tuple[bool, bool] | None:
        """Where the window pass tries a window of ids: (joins the current segment, decoded by the new tokenizer),
        given whether every id of it is mapped and the current segment's kind (None: no segment yet). A window
        that is not all mapped, or follows an old-tokenizer segment, goes to an old-tokenizer segment — never with
        a reused id in it (None: not tried); otherwise to a new-tokenizer one. The one rule of the three passes."""
        if not all_mapped or cur is False:
            if not self.reused_ids.isdisjoint(window):
                return None
            return cur is False, False
        return cur is True, True

    def _window_segments(self, ids: list[int], skip: bool) -> list[list[Any]]:
        """Second pass: a token that decodes to U+FFFD alone is grouped with up to 3 following tokens."""
        if self._fast_text(ids, True) is not None:  # every id has its bytes: the linear-time version
            return self._window_segments_bytes(ids)
        o2n = self.old_to_new
        segs: list[list[Any]] = []
        i, n = 0, len(ids)
        while i < n:
            t = ids[i]
            if t in self.replacement_ids:
                accepted = 0
                for w in range(1, 5):
                    if i + w > n:
                        break
                    win = ids[i : i + w]
                    cur = segs[-1] if segs else None
                    side = self._window_side(win, all(x in o2n for x in win), cur[0] if cur else None)
                    if side is None:
                        continue
                    joins, mapped = side
                    prefix = cur[1] if joins else []  # type: ignore[index]
                    dec = self._dec_new if mapped else self._dec_old
                    ok = REPLACEMENT not in dec(prefix + win, skip)
                    if ok:
                        if prefix:
                            cur[1].extend(win)  # type: ignore[index]
                        else:
                            segs.append([mapped, list(win)])
                        accepted = w
                        break
                if accepted:
                    i += accepted
                    continue
            m = t in o2n
            if segs and segs[-1][0] == m:
                segs[-1][1].append(t)
            else:
                segs.append([m, [t]])
            i += 1
        return segs

    def _window_segments_bytes(self, ids: list[int]) -> list[list[Any]]:
        """:meth:`_window_segments` on token bytes, in linear time (the same segments).

        A segment's bytes are decoded lazily: tokens appended to it are buffered and fed to its incremental UTF-8
        decoder in one call only when a window is tested against it (feeding a stream in one chunk or many gives
        the same output). "Segment + window decodes without U+FFFD" is then a strict decoding of the decoder's
        pending bytes (at most 3) and the window's: it fails exactly where the replacing decoder would write
        U+FFFD, and a decoded U+FFFD (one in the text itself) counts too. The window's bytes grow with it."""
        o2n, repl = self.old_to_new, self.replacement_ids
        table, _ = self._byte_table()
        # a segment: [mapped, ids, decoder, saw U+FFFD, how many of its ids the decoder has been fed]
        segs: list[list[Any]] = []

        def start(mapped: bool) -> list[Any]:
            segs.append([mapped, [], codecs.getincrementaldecoder("utf-8")(errors="replace"), False, 0])
            return segs[-1]

        def flush(seg: list[Any]) -> None:
            if seg[4] < len(seg[1]):
                if not seg[3] and REPLACEMENT in seg[2].decode(
                    b"".join([table[t] for t in seg[1][seg[4] :]])
                ):
                    seg[3] = True
                seg[4] = len(seg[1])

        def clean_after(seg: list[Any] | None, data: bytes) -> bool:
            if seg is not None:
                flush(seg)
                if seg[3]:
                    return False
                data = seg[2].getstate()[0] + data
            try:
                return REPLACEMENT not in data.decode("utf-8")
            except UnicodeDecodeError:
                return False

        i, n = 0, len(ids)
        cur: list[Any] | None = None
        while i < n:
            t = ids[i]
            if t in repl:
                accepted = 0
                data = b""
                all_mapped = True
                for w in range(1, 5):
                    if i + w > n:
                        break
                    x = ids[i + w - 1]
                    data += table[x]  # type: ignore[operator]
                    if x not in o2n:
                        all_mapped = False
                    side = self._window_side(ids[i : i + w], all_mapped, cur[0] if cur else None)
                    if side is None:
                        continue
                    joins, mapped = side
                    prefix = cur if joins else None
                    if clean_after(prefix, data):
                        cur = prefix if prefix is not None else start(mapped)
                        cur[1].extend(ids[i : i + w])
                        accepted = w
                        break
                if accepted:
                    i += accepted
                    continue
            m = t in o2n
            if cur is None or cur[0] != m:
                cur = start(m)
            cur[1].append(t)
            i += 1
        return [[s[0], s[1]] for s in segs]

    # ---------------------------------------------------------------- save / load
    def mapping_document(self) -> dict[str, Any]:
        """The JSON mapping file (format, id maps, target blocks, replacement ids, build info)."""
        return {
            "format": FORMAT,
            "version": 1,
            "target_blocks": self.target_blocks,
            "new_to_old": sorted([n, o] for n, o in self.new_to_old.items()),
            "reused_ids": sorted(self.reused_ids),
            "replacement_ids": sorted(self.replacement_ids),
            "info": self.info,
        }

    @cached_property
    def content_hash(self) -> str:
        """SHA-256 (16 hex digits) of everything encoding and decoding read: the old tokenizer's bytes, the new
        tokenizer and the mapping document (id maps, target blocks, replacement ids, build info). The key of what
        is computed from this tokenizer (the collateral table's disk store)."""
        h = hashlib.sha256(self.old.digest.encode("ascii"))
        h.update(b"\0" + self.new.to_str().encode("utf-8") + b"\0")
        h.update(json.dumps(self.mapping_document(), ensure_ascii=False, sort_keys=True).encode("utf-8"))
        return h.hexdigest()[:16]

    def files(self) -> dict[str, bytes]:
        """Relative path → bytes of the saved folder (old_tokenizer/, new_tokenizer/, the mapping JSON)."""
        out = {
            f"old_tokenizer/{k}": v for k, v in folder_files(self.old, base_config=self.old.config).items()
        }
        out["new_tokenizer/tokenizer.json"] = self.new.to_str().encode("utf-8")
        out[MAPPING_FILE] = json.dumps(self.mapping_document(), ensure_ascii=False, indent=1).encode("utf-8")
        return out

    def save(self, out_dir: str | Path) -> Path:
        """Write the tokenizer folder (no pickle); returns its path."""
        out = Path(out_dir)
        for rel, data in self.files().items():
            p = out / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        return out

    def zip_bytes(self, folder: str = "rbpe_tokenizer") -> bytes:
        """The saved folder as zip bytes, files under `folder/`."""
        return zip_files(sorted(self.files().items()), folder)

    @classmethod
    def load(cls, path: str | Path) -> ReuseTokenizer:
        """Load a folder written by :meth:`save` (the mapping file through the guarded JSON reader: size cap,
        nesting, UTF-8; a malformed mapping or new tokenizer is a DataError)."""
        root = Path(path)
        mp = root / MAPPING_FILE
        if not mp.is_file():
            raise DataError(f"{root}: no {MAPPING_FILE} (not an R-BPE tokenizer folder)")
        doc = parse_json(read_file(mp), str(mp))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
            raise DataError(f"{mp}: unknown format {got!r}")
        try:
            new_to_old = {int(n): int(o) for n, o in doc["new_to_old"]}
            target_blocks = [str(b) for b in doc["target_blocks"]]
            replacement_ids = frozenset(int(i) for i in doc["replacement_ids"])
            reused_ids = frozenset(int(i) for i in doc["reused_ids"])
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"{mp}: not an R-BPE mapping ({type(e).__name__}: {e})") from None
        info = doc.get("info", {})
        if not isinstance(info, dict):
            raise DataError(f"{mp}: 'info' must be an object")
        old = load(root / "old_tokenizer")
        new_file = root / "new_tokenizer" / "tokenizer.json"
        text = decode_utf8(read_file(new_file), str(new_file))
        try:
            new = tokenizers.Tokenizer.from_str(text)
        except Exception as e:  # the Rust parser raises plain Exceptions
            raise DataError(f"{new_file}: not a tokenizer.json ({e})") from None
        return cls(
            old=old,
            new=new,
            new_to_old=new_to_old,
            target_blocks=target_blocks,
            replacement_ids=replacement_ids,
            reused_ids=reused_ids,
            info=info,
        )


# ------------------------------------------------------------------------------------------ one call
def build_reuse_tokenizer(
    tok: LoadedTokenizer,
    texts: Iterable[str],
    *,
    target: str = "arabic",
    preserved: Sequence[str] = ("latin", "greek"),
    min_reusable: int = 20000,
    min_frequency: int = 2,
    rules: str = DEFAULT_RULES,
    protect: Sequence[str] = (),
    trainer: str = "bpe",
    parity_langs: Sequence[str] | None = None,
    train_lang: str | None = None,
    progress: Progress | None = None,
) -> ReuseTokenizer:
    """Run the whole R-BPE pipeline on a byte-level BPE tokenizer and training text.

    `rules` picks the class rules (module docstring), `protect` the protections (:data:`PROTECTIONS`),
    `min_frequency` the new BPE's minimum pair frequency. `trainer` ``parity`` trains the target tokenizer with
    parity-aware BPE (:func:`analysis.bpe.parity.train_parity_bpe`) over the FLORES languages written in the target
    script (`parity_langs`, default every such language): each language contributes its FLORES lines [0, 700)
    and balances on lines [700, 800); `texts` join the corpus of `train_lang` (their language; else the first).
    When `texts` hold the FLORES lines of `train_lang`, its lines 700–800 serve both as training and dev text."""
    _check_supported(tok)
    if trainer not in TRAINERS:
        raise DataError(f"unknown trainer {trainer!r}; choose one of {', '.join(TRAINERS)}")
    if min_frequency < 0:
        raise DataError("the minimum frequency cannot be negative")

    def say(message: str, frac: float) -> None:
        report(progress, frac, 1.0, message)

    say("classifying the vocabulary by Unicode block", 0.05)
    vc = classify_vocab(tok, rules)
    shield = protected_ids(tok, vc, target, preserved, min_reusable, protect)
    plan = choose_reusable(vc, target, preserved, min_reusable, shield)
    if not plan.reusable_ids:
        raise DataError("no reusable tokens: every script class is preserved or the vocabulary has none")
    say(f"cleaning the training text ({len(plan.selected)} reusable classes)", 0.15)
    tre = target_regex(plan.target_blocks)
    kept = 0
    segs: list[str] = []
    for t in clean_texts(texts, plan.reusable_blocks):
        kept += 1
        segs.extend(m.group() for m in tre.finditer(t))
    if not segs:
        raise DataError(f"the training text has no {target} characters after cleaning")
    say(f"training a {plan.reusable_count}-token {trainer} BPE on {len(segs):,} target segments", 0.3)
    langs: list[str] = []
    if trainer == "parity":
        new, langs = _train_parity_target(tok, plan, segs, parity_langs, train_lang, min_frequency)
    else:
        new = train_target_bpe(tok, segs, plan.reusable_count, min_frequency=min_frequency)
    say("mapping new ids onto reusable ids", 0.9)
    new_to_old, reused = build_id_maps(tok, new, plan.reusable_ids)
    info = {
        "base": tok.name,
        **plan.summary(),
        "rules": vc.rules,
        "protect": sorted(protect),
        "min_frequency": min_frequency,
        "trainer": trainer,
        "parity_langs": langs,
        "classes": vc.counts(),
        "training_samples_kept": kept,
        "training_chars": sum(map(len, segs)),
        "new_vocab_size": new.get_vocab_size(with_added_tokens=True),
        "common_tokens": len(new_to_old) - len(reused),
        "reused_tokens": len(reused),
    }
    say("done", 1.0)
    return ReuseTokenizer(
        old=tok,
        new=new,
        new_to_old=new_to_old,
        target_blocks=plan.target_blocks,
        replacement_ids=frozenset(vc.replacement_ids),
        reused_ids=frozenset(reused),
        info=info,
    )
