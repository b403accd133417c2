"""Tokenization parity between a Hugging Face tokenizer and llama.cpp reading its GGUF export.

Three kinds of text: the held-out FLORES-200 lines of every language (the lines after the first 800 of devtest,
:func:`analysis.texts.flores.split_lines`), the held-out shared code corpora (one file per language, cut to
:data:`CODE_CHARS`), and short strings placed around every added and special token. Per language: the share of
lines with identical ids and the first differing example. A difference is *explained* when it is llama.cpp's own:
llama.cpp applies no Unicode normalizer, so a line whose normalized form llama.cpp tokenizes to the Hugging Face
ids differs only by that (:data:`analysis.model.llamacpp.LLAMA_CPP_ISSUES`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.core.progress import Progress
from analysis.model.llamacpp import LLAMA_CPP_ISSUES, llama_tokenize, open_gguf
from analysis.texts import flores
from analysis.texts.code import code_languages, read_code
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: Characters of each code file compared (a file is one "line").
CODE_CHARS = 4000
#: Templates placing an added/special token `{t}` among ordinary text.
SPECIAL_TEMPLATES = ("Hello {t} world", "{t}x", "a {t}\n{t}b", " {t} ")


@dataclass
class ParityEntry:
    """One language (or code language, or the added-token strings): how many lines gave identical ids."""

    lang: str
    kind: str  # "flores" | "code" | "special"
    lines: int
    identical: int
    explained: int = 0
    reason: str | None = None
    first_diff: dict[str, Any] | None = None

    @property
    def share(self) -> float:
        """Share of lines with identical ids."""
        return self.identical / self.lines if self.lines else 1.0

    def to_json(self) -> dict:
        """JSON form (carries `lang`)."""
        return {
            "lang": self.lang,
            "kind": self.kind,
            "lines": self.lines,
            "identical": self.identical,
            "share": round(self.share, 6),
            "explained": self.explained,
            "unexplained": self.lines - self.identical - self.explained,
            "reason": self.reason,
            "first_diff": self.first_diff,
        }


@dataclass
class ParityReport:
    """Parity over every text kind, and the totals."""

    gguf: str
    entries: list[ParityEntry] = field(default_factory=list)
    blocked: str | None = None

    def totals(self, kind: str | None = None) -> dict[str, Any]:
        """Lines, identical, explained and the identical share, over all entries or one kind."""
        es = [e for e in self.entries if kind is None or e.kind == kind]
        lines = sum(e.lines for e in es)
        same = sum(e.identical for e in es)
        expl = sum(e.explained for e in es)
        return {
            "groups": len(es),
            "lines": lines,
            "identical": same,
            "explained": expl,
            "unexplained": lines - same - expl,
            "share": round(same / lines, 6) if lines else 1.0,
        }

    @property
    def ok(self) -> bool:
        """Every difference explained (and not blocked)."""
        return self.blocked is None and all(e.lines - e.identical - e.explained == 0 for e in self.entries)

    def to_json(self) -> dict:
        """The report as one JSON document."""
        return {
            "gguf": self.gguf,
            "blocked": self.blocked,
            "ok": self.ok,
            "totals": {k: self.totals(k) for k in ("flores", "code", "special")} | {"all": self.totals()},
            "languages": [e.to_json() for e in self.entries],
        }


def _normalizer_form(tok: LoadedTokenizer) -> str | None:
    """The Unicode normalization the tokenizer applies (NFC, NFKC, …), if any."""
    forms = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Precompiled"):
                forms.append(node["type"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(tok.normalizer)
    return "+".join(forms) or None


def _compare(
    tok: LoadedTokenizer, llm: Any, lang: str, kind: str, texts: Sequence[str], form: str | None
) -> ParityEntry:
    entry = ParityEntry(lang=lang, kind=kind, lines=0, identical=0)
    spm = tok.is_sentencepiece_style
    enc = tok.tokenizer
    norm = enc.normalizer
    texts = list(texts)
    batch = enc.encode_batch_fast(texts, add_special_tokens=True)  # one Rust call (ids only), on every core
    for text, hf_encoding in zip(texts, batch, strict=True):
        entry.lines += 1
        hf = hf_encoding.ids
        ll = llama_tokenize(llm, text)
        if hf == ll:
            entry.identical += 1
            continue
        explained = False
        if spm and _same_but_spaces(enc, hf, ll, tok.added_ids):
            explained = True
            entry.explained += 1
            entry.reason = LLAMA_CPP_ISSUES["spm_space"]
        elif form and norm is not None:
            normalized = norm.normalize_str(text)
            if normalized != text and llama_tokenize(llm, normalized) == hf:
                explained = True
                entry.explained += 1
                entry.reason = LLAMA_CPP_ISSUES["normalizer"].format(form=form)
        if entry.first_diff is None or (not explained and entry.first_diff.get("explained")):
            at = next(
                (i for i, (a, b) in enumerate(zip(hf, ll, strict=False)) if a != b), min(len(hf), len(ll))
            )
            entry.first_diff = {
                "text": text[:300],
                "at_token": at,
                "hf": hf[max(0, at - 2) : at + 6],
                "llama_cpp": ll[max(0, at - 2) : at + 6],
                "hf_pieces": [
                    enc.decode([i], skip_special_tokens=False) for i in hf[max(0, at - 2) : at + 6]
                ],
                "llama_cpp_pieces": [
                    enc.decode([i], skip_special_tokens=False) if i < enc.get_vocab_size() else f"<{i}>"
                    for i in ll[max(0, at - 2) : at + 6]
                ],
                "explained": explained,
            }
    return entry


_SPACES = re.compile("\u2581+")


def _same_but_spaces(enc: Any, a: list[int], b: list[int], added: frozenset[int]) -> bool:
    """Whether two id sequences spell the same pieces once the ▁ that opens the text or follows an added token is
    dropped and every other run of ▁ counts as one (llama.cpp's SentencePiece space prefix)."""

    def spelled(ids: list[int]) -> str:
        out, after_added = [], True
        for i in ids:
            piece = enc.id_to_token(i) or f"<{i}>"
            if i in added:
                out.append(f"\x00{piece}\x00")
                after_added = True
                continue
            if after_added:
                piece = piece.lstrip("\u2581")
            after_added = after_added and not piece
            out.append(piece)
        return _SPACES.sub("\u2581", "".join(out))

    return spelled(a) == spelled(b)


def special_strings(tok: LoadedTokenizer) -> list[str]:
    """Short strings placing every added and special token among ordinary text (:data:`SPECIAL_TEMPLATES`)."""
    return [t.format(t=a.content) for a in tok.added_tokens for t in SPECIAL_TEMPLATES]


def tokenization_parity(
    tok: LoadedTokenizer,
    gguf_path: str | os.PathLike,
    *,
    langs: Sequence[str] | None = None,
    max_lines: int | None = None,
    code: bool = True,
    specials: bool = True,
    progress: Progress | Callable[..., Any] | None = None,
) -> ParityReport:
    """Compare `tok` (Hugging Face) with llama.cpp reading `gguf_path`, id sequence by id sequence.

    `langs` (default: every FLORES language available) and `max_lines` (per language; default all held-out lines)
    bound the FLORES part; `code` adds the held-out shared code corpora, `specials` the added-token strings.
    """
    llm = open_gguf(gguf_path, vocab_only=True)
    report = ParityReport(gguf=os.path.basename(os.fspath(gguf_path)))
    form = _normalizer_form(tok)
    codes = list(langs) if langs is not None else flores.available_codes()
    steps = len(codes) + (1 if code else 0) + (1 if specials else 0)
    for k, lang in enumerate(codes):
        _, held = flores.split_lines(lang)
        report.entries.append(_compare(tok, llm, lang, "flores", held[:max_lines], form))
        if progress is not None:
            progress(k + 1, steps, f"FLORES {lang}")
    if code:
        for lang in code_languages(heldout=True):
            recs = read_code(languages=[lang], heldout=True, max_files_per_repo=1)[:5]
            texts = [r.text[:CODE_CHARS] for r in recs]
            report.entries.append(_compare(tok, llm, lang, "code", texts, form))
        if progress is not None:
            progress(len(codes) + 1, steps, "code corpora")
    if specials and tok.added_tokens:
        report.entries.append(_compare(tok, llm, "added-tokens", "special", special_strings(tok), form))
        if progress is not None:
            progress(steps, steps, "added and special tokens")
    return report
