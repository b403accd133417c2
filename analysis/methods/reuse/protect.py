"""R-BPE's protections (Hamdan, Al Mraikhat, Zaraket, "R-BPE: Improving BPE-Tokenizers with Token Reuse", EMNLP
2025): the ids a reuse must keep although their class is reusable — ids whose text is only Common/Inherited-script
characters (`symbols`) and ids that a kept-script language's FLORES training lines encode to (`usage`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from analysis.core.cache import DiskCache, memoize
from analysis.core.unicode import script
from analysis.errors import DataError
from analysis.texts import flores
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .classes import REPLACEMENT, ReusePlan, VocabClasses, choose_reusable, standalone_text
from .segments import language_role

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
