"""R-BPE token reuse (Hamdan, Al Mraikhat, Zaraket, "R-BPE: Improving BPE-Tokenizers with Token Reuse", EMNLP
2025), implemented from the paper.

This module holds :class:`ReuseTokenizer` (encode, save, load; its decoding is :mod:`.decoding`) and
:func:`build_reuse_tokenizer`, the one call that runs the pipeline. The steps live beside it: the vocabulary
classes in :mod:`.classes`, the protections in :mod:`.protect`, the target-script segments in :mod:`.segments`,
the target BPE and the id maps in :mod:`.target`; the measures (:mod:`.measures`) and the model side
(:mod:`.model`) apart.

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

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import tokenizers

from analysis.core.inputs import decode_utf8, parse_json, read_file
from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.tokenizer.export import folder_files, zip_files
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .classes import DEFAULT_RULES, choose_reusable, classify_vocab
from .decoding import ReuseDecoding
from .protect import protected_ids
from .segments import segment, target_regex
from .target import (
    TRAINERS,
    build_id_maps,
    check_supported,
    clean_texts,
    train_parity_target,
    train_target_bpe,
)

MAPPING_FILE = "rbpe_mapping.json"
FORMAT = "tokenizer-lab/r-bpe"


@dataclass
class ReuseTokenizer(ReuseDecoding):
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
    check_supported(tok)
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
        new, langs = train_parity_target(tok, plan, segs, parity_langs, train_lang, min_frequency)
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
