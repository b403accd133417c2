"""What every pruning step shares: the supported tokenizers, the ids that are never pruned, text mixes and
token counts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from analysis.bpe import require_bpe
from analysis.errors import DataError
from analysis.texts.flores import split_lines
from analysis.tokenizer.alphabets import BYTE_TO_CHAR
from analysis.tokenizer.tokenizer import LoadedTokenizer


def check_prunable(tok: LoadedTokenizer) -> None:
    """Raise UnsupportedTokenizerError unless the tokenizer is a BPE model (byte-level or SentencePiece-style)."""
    require_bpe(tok, "pruning")


def alphabet_ids(tok: LoadedTokenizer) -> set[int]:
    """Ids of the base alphabet that byte fallback / byte-level encoding relies on (never pruned by default)."""
    out: set[int] = set()
    if tok.is_byte_level:
        for ch in BYTE_TO_CHAR.values():
            i = tok.vocab.get(ch)
            if i is not None:
                out.add(i)
    if tok.byte_fallback:
        for b in range(256):
            i = tok.vocab.get(f"<0x{b:02X}>")
            if i is not None:
                out.add(i)
    return out


def protected_ids(tok: LoadedTokenizer, *, keep_added: bool = True, keep_alphabet: bool = True) -> set[int]:
    """Ids no order outputs: added/special tokens, unk/bos/eos/pad, and (by default) the byte alphabet."""
    out: set[int] = set()
    if keep_added:
        out |= set(tok.added_ids)
    else:
        out |= {a.id for a in tok.added_tokens if a.special}
    names = [tok.unk_token]
    for key in ("unk_token", "bos_token", "eos_token", "pad_token"):
        v = tok.config.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        names.append(v)
    for name in names:
        if isinstance(name, str):
            i = tok.tokenizer.token_to_id(name)
            if i is not None:
                out.add(i)
    out |= _post_processor_ids(tok)
    if keep_alphabet:
        out |= alphabet_ids(tok)
    return out


def _post_processor_ids(tok: LoadedTokenizer) -> set[int]:
    out: set[int] = set()
    for s in post_processor_tokens(tok.post_processor):
        i = tok.tokenizer.token_to_id(s)
        if i is not None:
            out.add(i)
    return out


def post_processor_tokens(pp: dict | None) -> set[str]:
    """Token strings the post-processor refers to (TemplateProcessing special tokens, Bert/Roberta cls/sep)."""
    out: set[str] = set()
    if not isinstance(pp, dict):
        return out
    if pp.get("type") == "Sequence":
        for p in pp.get("processors") or []:
            out |= post_processor_tokens(p)
        return out
    for key in ("cls", "sep"):
        if isinstance(pp.get(key), list) and pp[key]:
            out.add(pp[key][0])
    for spec in (pp.get("special_tokens") or {}).values():
        out.update(spec.get("tokens") or [])
    return out


#: What the Prune page opens with, in one place for the page and the server's warm-up of its first view
#: (`ui/warmup.py`): the leaf-frequency order on an equal mix of the first `FIRST_VIEW_TRAIN_LINES` FLORES-200
#: devtest lines of each language (the rest held out for the curves), Latin the script the script order keeps.
FIRST_VIEW_ORDER = "leaf-frequency"
FIRST_VIEW_LANGUAGES = ("est_Latn", "eng_Latn")
FIRST_VIEW_TRAIN_LINES = 800
FIRST_VIEW_SCRIPTS = ("Latin",)


def mix_texts(
    parts: Sequence[Sequence[str]], weights: Sequence[float] | None = None, *, by: str = "bytes"
) -> list[str]:
    """A text mix with the given shares (default equal): each part is cut so the shares hold.

    `by="bytes"`: shares of UTF-8 bytes (lines kept whole, in order) — for texts of any kind.
    `by="lines"`: shares of lines — for parallel data such as FLORES, where `mix_texts([et[:800], en[:800]],
    by="lines")` is exactly the first 800 lines of each.
    """
    if by not in ("bytes", "lines"):
        raise DataError("mix shares are counted in 'bytes' or 'lines'")
    parts = [[ln for ln in p if ln.strip()] for p in parts]
    if not parts or any(not p for p in parts):
        raise DataError("every text in the mix must contain at least one non-empty line")
    w = list(weights) if weights is not None else [1.0] * len(parts)
    if len(w) != len(parts) or any(x <= 0 for x in w):
        raise DataError("give one positive weight per text")

    def size(ln: str) -> int:
        return 1 if by == "lines" else len(ln.encode("utf-8")) + 1

    sizes = [sum(size(ln) for ln in p) for p in parts]
    unit = min(s / x for s, x in zip(sizes, w))  # bytes (lines) per unit weight that every part can supply
    out: list[str] = []
    for p, x in zip(parts, w):
        budget = unit * x
        used = 0
        for ln in p:
            b = size(ln)
            if used and used + b > budget * 1.0001:
                break
            out.append(ln)
            used += b
    return out


def flores_mix(
    languages: Sequence[str], n_train: int, extra: Sequence[Sequence[str]] = ()
) -> tuple[list[str], dict[str, list[str]]]:
    """(the training mix, the held-out lines per language): the first `n_train` FLORES-200 devtest lines of each
    language (the rest held out) in equal shares of lines, or, with `extra` texts (uploads), all of them in
    equal shares of bytes (:func:`mix_texts`); an empty mix when there is nothing to mix. The Prune page's mix
    and the server's warm-up of its first view (`ui/warmup.py`) are the same call."""
    parts: list[Sequence[str]] = []
    held: dict[str, list[str]] = {}
    for lang in languages:
        train, held[lang] = split_lines(lang, n_train)
        parts.append(train)
    parts += extra
    texts = mix_texts(parts, by="bytes" if extra else "lines") if parts else []
    return texts, held


def _counting_tokenizer(tok: LoadedTokenizer):
    """A Rust tokenizer with ignore_merges off and no dropout, for counting and metrics (read-only use)."""
    return tok.merges_only_tokenizer()


def token_counts(
    tok: LoadedTokenizer, texts: Iterable[str], *, add_special_tokens: bool = True, batch_size: int = 2048
) -> np.ndarray:
    """Frequency of every id (index = id) when encoding the texts with ignore_merges forced off.

    Encoding adds special tokens (e.g. BOS) as the model sees them, so those are counted too.
    """
    t = _counting_tokenizer(tok)
    size = max(tok.id_to_token) + 1 if tok.id_to_token else 0
    counts = np.zeros(size, dtype=np.int64)
    batch: list[str] = []
    any_text = False

    def flush() -> None:
        if not batch:
            return
        enc = t.encode_batch_fast(batch, add_special_tokens=add_special_tokens)
        ids = np.fromiter((i for e in enc for i in e.ids), dtype=np.int64)
        if ids.size:
            counts[:size] += np.bincount(ids, minlength=size)[:size]
        batch.clear()

    for line in texts:
        if not line:
            continue
        any_text = True
        batch.append(line)
        if len(batch) >= batch_size:
            flush()
    flush()
    if not any_text:
        raise DataError("the text sample is empty")
    return counts
