"""Robustness and quality of a tokenizer edit, before → after: what compression numbers do not show.

* **Single-token retention rate (STRR)** per held-out language: the share of words the tokenizer keeps as one
  token, in context (TokLens, ACL 2026 workshop, PyPI `toklens`, reports that it predicts per-language MMLU-ProX
  scores). A *word* here is a maximal run of Unicode word characters (`\\w+` of the `regex` module: letters,
  marks, digits and connector punctuation), found in each line as written; it is kept whole when exactly one token
  of the line's encoding overlaps its characters (a token that also holds the space before it, as `Ġword` and
  `▁word` do, still counts). Scripts written without spaces have long "words" and a low STRR before and after.
* **Words whose split changed** (for prunes above all): the share of words whose token boundaries inside the word
  differ after the edit.
* **Digit grouping**: numbers of 4 or more digits (from :func:`analysis.texts.probes.numbers_and_dates`) whose
  digit count is not a multiple of 3, by how their pieces fall: right-aligned 3-digit groups (`1|234|567`),
  left-aligned (`123|456|7`), single digits, or other.
* **Round trip** decode(encode(x)) == x on :data:`analysis.texts.probes.HOSTILE`.
* **Worst-case encode time** on :func:`analysis.texts.probes.pathological_inputs` (512 KiB each by default, ``$TOKLAB_PATHOLOGICAL_KB``): the CPU time
  of the process (other load on the machine does not count; the wall time is kept beside it), flagged at
  :data:`SLOW_SECONDS`; an input that takes that long at a sixteenth of its size is not encoded whole (its time is
  projected quadratically, and flagged). A measurement of this machine, never a pass/fail.

:func:`robustness_delta` is the one entry point every edit calls (extend, prune, reuse, SA-BPE, transplant).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import regex

from analysis.core.cache import memoize
from analysis.core.paths import pathological_bytes
from analysis.core.progress import Progress, report
from analysis.texts import probes
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: A word: a maximal run of Unicode word characters.
WORD = regex.compile(r"\w+")
#: A number: a maximal run of decimal digits (any script's).
NUMBER = regex.compile(r"\d+")
#: An encode this slow on a pathological input is flagged.
SLOW_SECONDS = 1.0
#: Round-trip failures listed per tokenizer.
SHOWN_FAILURES = 10


@dataclass(frozen=True)
class LanguageRobustness:
    """One held-out language: words, STRR before and after, the share of words whose split changed."""

    lang: str
    words: int
    strr_before: float
    strr_after: float
    split_changed: float

    def to_json(self) -> dict[str, Any]:
        """The row (`lang`, `words`, `strr_before`, `strr_after`, `split_changed`)."""
        return {"lang": self.lang, "words": self.words, "strr_before": self.strr_before,
                "strr_after": self.strr_after, "split_changed": self.split_changed}  # fmt: skip


@dataclass(frozen=True)
class TokenizerRobustness:
    """The tokenizer-level measures of one side (before or after)."""

    #: shares of the classified numbers: right, left, single, other (and how many were classified)
    digits: dict[str, float]
    round_trip_ok: int
    round_trip_total: int
    round_trip_failures: list[dict[str, str]]
    #: input label → seconds (projected when `projected`), with the flag
    encode_seconds: list[dict[str, Any]]

    @property
    def slow_inputs(self) -> list[str]:
        """The pathological inputs whose encode took (or would take) at least :data:`SLOW_SECONDS`."""
        return [e["input"] for e in self.encode_seconds if e["slow"]]

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "digits": self.digits,
            "round_trip": {
                "ok": self.round_trip_ok,
                "total": self.round_trip_total,
                "failures": self.round_trip_failures,
            },  # fmt: skip
            "encode_seconds": self.encode_seconds,  # each entry flags its input `slow` (≥ SLOW_SECONDS)
        }


@dataclass(frozen=True)
class RobustnessDelta:
    """Before → after of one edit: per held-out language and per tokenizer (see the module docstring)."""

    languages: list[LanguageRobustness]
    before: TokenizerRobustness
    after: TokenizerRobustness
    seconds: float
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The one JSON document (the `robustness` entry of each edit's report)."""
        return {
            "word": "maximal run of Unicode word characters (\\w+); kept whole when one token overlaps it",
            "languages": [r.to_json() for r in self.languages],
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------------------
# Words and their pieces
# --------------------------------------------------------------------------------------------------
Encoder = Callable[[Sequence[str]], list[list[tuple[int, int]]]]


def offsets_encoder(tok: LoadedTokenizer) -> Encoder:
    """Lines → each line's token character spans, in one Rust batch (no special tokens)."""

    def encode(lines: Sequence[str]) -> list[list[tuple[int, int]]]:
        return [e.offsets for e in tok.tokenizer.encode_batch(list(lines), add_special_tokens=False)]

    return encode


@dataclass(frozen=True)
class Codec:
    """What the measures need of an edit that is more than one tokenizer.json (R-BPE routes text between two):
    lines → token spans, one text → decode(encode(text)), and one plain encode (timed)."""

    spans: Encoder
    round_trip: Callable[[str], str]
    encode: Callable[[str], object]


def codec_of(tok: LoadedTokenizer) -> Codec:
    """A tokenizer as a :class:`Codec` (no special tokens added or skipped)."""
    t = tok.tokenizer

    def rt(text: str) -> str:
        return t.decode(t.encode(text, add_special_tokens=False).ids, skip_special_tokens=False)

    return Codec(offsets_encoder(tok), rt, lambda text: t.encode(text, add_special_tokens=False))


def word_pieces(line: str, offsets: Sequence[tuple[int, int]], pattern: regex.Pattern = WORD) -> list[tuple]:
    """For each word (`pattern` match) of a line: the token boundaries inside it, as a tuple — `()` when one token
    covers it, else the positions (relative to the word) where a token inside it ends; tokens that map to the same
    characters (one character's byte pieces) add a boundary of their own."""
    if not offsets:
        return [("?",) for _ in pattern.finditer(line)]
    starts = np.fromiter((s for s, _ in offsets), dtype=np.int64, count=len(offsets))
    ends = np.fromiter((e for _, e in offsets), dtype=np.int64, count=len(offsets))
    out = []
    for m in pattern.finditer(line):
        ws, we = m.span()
        lo = int(np.searchsorted(ends, ws, side="right"))  # first token ending after the word starts
        hi = int(np.searchsorted(starts, we, side="left"))  # tokens starting before the word ends
        n = hi - lo
        if n <= 1:
            out.append(())
        else:
            out.append(tuple(int(min(e, we)) - ws for e in ends[lo : hi - 1]))
    return out


def _pieces(enc: Encoder, lines: Sequence[str], pattern: regex.Pattern = WORD) -> list[tuple]:
    return [p for line, offs in zip(lines, enc(lines)) for p in word_pieces(line, offs, pattern)]


def strr(tok: LoadedTokenizer, lines: Sequence[str]) -> float:
    """The single-token retention rate of `lines` (see the module docstring); 0.0 without words."""
    pieces = _pieces(offsets_encoder(tok), lines)
    return sum(p == () for p in pieces) / len(pieces) if pieces else 0.0


def language_row(lang: str, lines: Sequence[str], before: Encoder, after: Encoder) -> LanguageRobustness:
    """STRR before and after and the share of words whose split changed, for one language's lines."""
    pb, pa = _pieces(before, lines), _pieces(after, lines)
    n = len(pb)
    if not n:
        return LanguageRobustness(lang, 0, 0.0, 0.0, 0.0)
    return LanguageRobustness(
        lang,
        n,
        sum(p == () for p in pb) / n,
        sum(p == () for p in pa) / n,
        sum(a != b for a, b in zip(pa, pb)) / n,
    )


# --------------------------------------------------------------------------------------------------
# Tokenizer-level measures
# --------------------------------------------------------------------------------------------------
def grouping(n_digits: int, cuts: tuple) -> str:
    """How a number's pieces fall (`cuts`: the boundaries inside it, :func:`word_pieces`): right, left, single,
    other."""
    inside = sorted({c for c in cuts if 0 < c < n_digits})  # byte pieces of one character share a boundary
    sizes = np.diff([0, *inside, n_digits]).tolist()
    if all(s == 1 for s in sizes):
        return "single"
    if sizes == [n_digits % 3] + [3] * (n_digits // 3):
        return "right"
    if sizes == [3] * (n_digits // 3) + [n_digits % 3]:
        return "left"
    return "other"


def digit_grouping(enc: Encoder, lines: Sequence[str]) -> dict[str, float]:
    """Shares of right-aligned, left-aligned, single-digit and other splits among the numbers of `lines` with 4
    or more digits whose count is not a multiple of 3 (where right and left alignment differ)."""
    counts = {"right": 0, "left": 0, "single": 0, "other": 0}
    for line, offs in zip(lines, enc(lines)):
        spans = [m for m in NUMBER.finditer(line)]
        for m, cuts in zip(spans, word_pieces(line, offs, NUMBER)):
            n = m.end() - m.start()
            if n >= 4 and n % 3:
                counts[grouping(n, cuts)] += 1
    total = sum(counts.values())
    return {**{k: (v / total if total else 0.0) for k, v in counts.items()}, "numbers": total}


def round_trip(codec: Codec) -> tuple[int, list[dict[str, str]]]:
    """(texts of :data:`probes.HOSTILE` that decode(encode(x)) returns unchanged, the failures)."""
    back = [codec.round_trip(x) for _, x in probes.HOSTILE]
    fails = [
        {"input": label, "text": x, "decoded": d} for (label, x), d in zip(probes.HOSTILE, back) if d != x
    ]
    return len(probes.HOSTILE) - len(fails), fails[:SHOWN_FAILURES]


def _timed(encode: Callable[[str], object], text: str) -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds) of one encode."""
    c0, w0 = time.process_time(), time.perf_counter()
    encode(text)
    return time.process_time() - c0, time.perf_counter() - w0


def encode_times(tok: LoadedTokenizer | Codec, inputs: Mapping[str, str]) -> list[dict[str, Any]]:
    """Seconds to encode each input once (one call, no batch): `seconds` is the CPU time of this process (its
    threads included: an R-BPE encode batches its segments), which other work on the machine does not inflate,
    and decides the `slow` flag; `wall_seconds` is the elapsed time. An input is first encoded at a sixteenth of its length;
    when that alone takes :data:`SLOW_SECONDS`, the whole is not encoded and both times are projected as quadratic
    growth (×256), marked `projected`."""
    encode = (codec_of(tok) if isinstance(tok, LoadedTokenizer) else tok).encode
    out = []
    for label, text in inputs.items():
        cpu, wall = _timed(encode, text[: max(1, len(text) // 16)])
        projected = cpu >= SLOW_SECONDS
        if projected:
            cpu, wall = cpu * 256, wall * 256
        else:
            cpu, wall = _timed(encode, text)
        out.append({"input": label, "bytes": len(text.encode("utf-8")), "seconds": round(cpu, 3),
                    "wall_seconds": round(wall, 3), "projected": projected, "slow": cpu >= SLOW_SECONDS})  # fmt: skip
    return out


@memoize(maxsize=8)
def tokenizer_robustness(
    tok: LoadedTokenizer, *, pathological: Mapping[str, str] | None = None
) -> TokenizerRobustness:
    """Digit grouping, round trip and encode times of one tokenizer (`pathological`: the inputs to time;
    default :func:`probes.pathological_inputs` of :func:`~analysis.core.paths.pathological_bytes`, without FLORES). Remembered per
    tokenizer in this process: the original of many edits is measured once."""
    return codec_robustness(codec_of(tok), pathological=pathological)


def codec_robustness(codec: Codec, *, pathological: Mapping[str, str] | None = None) -> TokenizerRobustness:
    """:func:`tokenizer_robustness` of a :class:`Codec` (not remembered)."""
    ok, fails = round_trip(codec)
    inputs = probes.pathological_inputs(pathological_bytes()) if pathological is None else pathological
    return TokenizerRobustness(
        digits=digit_grouping(codec.spans, probes.numbers_and_dates()),
        round_trip_ok=ok,
        round_trip_total=len(probes.HOSTILE),
        round_trip_failures=fails,
        encode_seconds=encode_times(codec, inputs),
    )


def robustness_delta(
    before: LoadedTokenizer,
    after: LoadedTokenizer | Codec,
    heldout: Mapping[str, Sequence[str]],
    *,
    pathological: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> RobustnessDelta:
    """The robustness of an edit, before → after, on the held-out lines of each language (`heldout`: language
    → lines) and on the generated probe sets. `after` is the edited tokenizer, or a :class:`Codec` for an edit that
    is more than one tokenizer.json (R-BPE). Every edit calls this one function (extend, prune, reuse, SA-BPE,
    transplant)."""
    t0 = time.perf_counter()
    enc_b = offsets_encoder(before)
    enc_a = after.spans if isinstance(after, Codec) else offsets_encoder(after)
    rows = []
    total = len(heldout) + 2
    for k, (lang, lines) in enumerate(heldout.items()):
        report(progress, k, total, lang)
        rows.append(language_row(lang, [s for s in lines if s], enc_b, enc_a))
    report(progress, len(heldout), total, "before: digits, round trip, encode times")
    side_b = tokenizer_robustness(before, pathological=pathological)
    report(progress, len(heldout) + 1, total, "after: digits, round trip, encode times")
    if isinstance(after, Codec):
        side_a = codec_robustness(after, pathological=pathological)
    else:
        side_a = tokenizer_robustness(after, pathological=pathological)
    report(progress, total, total, "done")
    return RobustnessDelta(rows, side_b, side_a, time.perf_counter() - t0)
