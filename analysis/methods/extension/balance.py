"""Parity-aware auxiliary tokenizers for the naive extension methods, measured against the plain one.

The naive methods add the tokens of an auxiliary ("supplement") tokenizer trained on the extension text. When
that text spans several languages, the auxiliary tokenizer can be the parity-aware BPE of Foroutan et al.
(*Parity-Aware Byte-Pair Encoding: Improving Cross-lingual Fairness in Tokenization*, arXiv 2508.04796, 2025;
:func:`analysis.bpe.parity.train_parity_bpe`): each merge is the best one of the language compressed worst so far,
so the added tokens serve the languages more evenly. :func:`compare_parity` trains the plain and the
parity-aware auxiliary tokenizer at the same vocabulary size on the same per-language text, extends the base
with N tokens of each, and measures both on the FLORES held-out lines: per language bytes/token and the premium
against English (Petrov et al. 2023), and over the languages the mean, maximum and Gini of the premiums.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.bpe.parity import measure, summarize
from analysis.errors import DataError
from analysis.texts import flores
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .methods import AuxVocab, ParityText, aux_new_tokens, parity_applies, train_auxiliary
from .plan import Plan, plan

#: FLORES devtest lines (0-based, end excluded) used as the parallel development sets: the last 100 of the
#: training lines, so the held-out lines stay unseen.
DEV_LINES = (700, flores.FLORES_TRAIN_LINES)
#: Summary entries compared between the two auxiliary tokenizers.
_COMPARED = ("premium_mean", "premium_max", "premium_gini", "premium_std", "bytes_per_token")


def flores_codes(labels: Sequence[str]) -> list[str]:
    """The labels that are FLORES-200 codes here (aliases resolved), in order."""
    data = flores.dataset()
    out = []
    for lab in labels:
        try:
            out.append(data.resolve(lab))
        except DataError:
            continue
    return out


def parity_text(corpora: Mapping[str, list[str]], variant: str = "base") -> ParityText:
    """The parity-aware trainer's input: one corpus per language; when every language is a FLORES code, the
    FLORES lines :data:`DEV_LINES` of each are the parallel development sets (else the trainer balances the
    per-language training totals). A development line never stays in the training text (FLORES training lines
    1–800 include them), so the balancing measures text the auxiliary tokenizers did not learn from."""
    langs = list(corpora)
    codes = flores_codes(langs)
    dev = None
    text = {k: list(v) for k, v in corpora.items()}
    if len(codes) == len(langs) and len(set(codes)) == len(codes):
        a, b = DEV_LINES
        dev = {lab: flores.split_lines(code)[0][a:b] for lab, code in zip(langs, codes)}
        seen = {k: set(v) for k, v in dev.items()}
        text = {k: [x for x in v if x not in seen[k]] for k, v in text.items()}
    return ParityText(text, dev, variant)


def _side(base: LoadedTokenizer, p: Plan, n: int, held: dict[str, list[str]]) -> dict[str, Any]:
    ext = p.apply(n)
    rows = measure(ext.tokenizer.tokenizer, held, flores.ENGLISH)
    return {"added": ext.n_added, "summary": summarize(rows, flores.ENGLISH), "rows": rows}


def parity_auxiliaries(
    base: LoadedTokenizer,
    n: int,
    parity: ParityText,
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
) -> tuple[AuxVocab, AuxVocab]:
    """(plain, parity-aware) auxiliary tokenizers of the same vocabulary size (256 + 2·n, the plain default) on
    the same lines."""
    why = parity_applies(base)
    if why:
        raise DataError(why)
    size = 256 + 2 * n
    aux_plain = train_auxiliary(
        base, parity.lines(), size, max_token_length=max_token_length, min_frequency=min_frequency
    )
    aux_par = train_auxiliary(base, (), size, min_frequency=min_frequency, parity=parity)
    return aux_plain, aux_par


def compare_parity(
    base: LoadedTokenizer,
    method: str,
    n: int,
    parity: ParityText,
    *,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    auxiliaries: tuple[AuxVocab, AuxVocab] | None = None,
) -> tuple[dict[str, Any], Plan]:
    """Plain vs parity-aware auxiliary tokenizer for a naive method (module docstring); returns the comparison
    and the parity-aware plan. The two auxiliary tokenizers (:func:`parity_auxiliaries`, or `auxiliaries`) have
    the same size and text; both extensions are measured on FLORES held-out lines of the languages that are
    FLORES codes, with English as the reference of the premiums."""
    aux_plain, aux_par = auxiliaries or parity_auxiliaries(
        base, n, parity, min_frequency=min_frequency, max_token_length=max_token_length
    )
    plans = {
        "plain": plan(base, method, [], n, aux=aux_plain, min_frequency=min_frequency),
        "parity": plan(base, method, [], n, aux=aux_par, min_frequency=min_frequency),
    }
    n = min(n, plans["plain"].n_available, plans["parity"].n_available)
    codes = flores_codes(list(parity.languages))
    out: dict[str, Any] = {
        "method": method,
        "n": n,
        "languages": list(parity.languages),
        "variant": parity.variant,
        "dev": f"FLORES lines {DEV_LINES[0] + 1}–{DEV_LINES[1]}" if parity.dev else None,
        "aux_vocab_size": aux_plain.vocab_size,
        "reference": flores.ENGLISH,
        "measured_on": f"FLORES held-out lines {flores.FLORES_TRAIN_LINES + 1}–1012",
        "measured_languages": codes,
        "overlap": len(set(aux_new_tokens(base, aux_plain, n)) & set(aux_new_tokens(base, aux_par, n))),
    }
    if not codes:
        out["note"] = "no training language is a FLORES code: nothing to measure on held-out parallel text"
        return out, plans["parity"]
    held = {c: flores.split_lines(c)[1] for c in dict.fromkeys([*codes, flores.ENGLISH])}
    base_rows = measure(base.tokenizer, held, flores.ENGLISH)
    out["base"] = {"summary": summarize(base_rows, flores.ENGLISH), "rows": base_rows}
    for kind, p in plans.items():
        out[kind] = _side(base, p, n, held)
    a, b = out["plain"]["summary"], out["parity"]["summary"]
    out["difference"] = {k: None if a.get(k) is None or b.get(k) is None else b[k] - a[k] for k in _COMPARED}
    return out, plans["parity"]
