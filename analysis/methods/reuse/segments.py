"""Which characters are the target's under R-BPE (Hamdan, Al Mraikhat, Zaraket, EMNLP 2025): a regex character
class of Unicode blocks (:func:`char_class`), the target-script segments of a text (:func:`segment`: the reuse
tokenizer encodes those with the new tokenizer, the rest with the old one) and the role of a language (target,
reused or kept: :func:`language_role`)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from analysis.core.unicode import blocks


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
