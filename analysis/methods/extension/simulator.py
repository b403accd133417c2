"""Fast, exact measurement of an extension prefix on fixed texts, without building the extended tokenizer.

:class:`PrefixSimulator` encodes the texts once with the base tokenizer and re-merges each distinct pre-token
with the appended merges of a prefix through the replay's merge loop (:class:`analysis.bpe.MergeTable`);
:func:`simulated_unreachable` is the Self-Tokenization Test of the new tokens done the same way. Both are
checked against the real extended tokenizer in the tests.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from analysis.bpe import MergeTable, stt_tokenize_fn
from analysis.bpe.training import with_characters
from analysis.tokenizer.alphabets import SPIECE_UNDERLINE
from analysis.tokenizer.tokenizer import LoadedTokenizer

# --------------------------------------------------------------------------------------------------
# Fast, exact measurement of a prefix on fixed texts
# --------------------------------------------------------------------------------------------------
#: Prefix marking a new added-token match in simulated rows (so it never equals a vocabulary string).
ADDED_MARK = "\x00"


#: Appended merges: a list of (left, right) pairs, or the same as a :class:`analysis.bpe.MergeTable`.
Merges = Sequence[tuple[str, str]] | MergeTable


def _table(merges: Merges) -> MergeTable:
    return merges if isinstance(merges, MergeTable) else MergeTable(merges)


def _bytes_of_piece(t: str) -> list[str]:
    return [f"<0x{b:02X}>" for b in t.encode("utf-8")]


def _without(unit: tuple[str, ...], drop: set[str]) -> tuple[str, ...]:
    """A unit with the characters of a prefix that lacks them (`drop`) spelled as byte-fallback pieces."""
    if drop and any(t in drop for t in unit):
        return tuple(x for t in unit for x in (_bytes_of_piece(t) if t in drop else (t,)))
    return unit


def _merged(unit: tuple[str, ...], table: MergeTable, whole: set[str] | None = None) -> tuple[str, ...]:
    """A unit after the appended merges; with `whole` (ignore_merges), a unit that spells one of those tokens
    becomes that token without merging."""
    if whole and len(unit) > 1:
        joined = "".join(unit)
        if joined in whole:
            return (joined,)
    return table.apply(unit)


class PrefixSimulator:
    """Tokenize fixed texts with base + appended merges of a prefix, without building the tokenizer.

    The texts are encoded once with the base tokenizer (Rust); the pre-tokens (and, for SentencePiece
    vocabularies, `▁`-chunks, which no merge crosses) are deduplicated. For a prefix, each distinct unit is
    re-merged with the appended merges only — base merges never involve the new tokens and always outrank
    them — by the same lowest-rank-leftmost rule as `tokenizers`; `ignore_merges` is honoured. For
    `add-tokens`, lines are split on the added contents and the pieces are encoded with the base.
    """

    def __init__(
        self, base: LoadedTokenizer, texts: dict[str, Sequence[str]], extra_chars: Sequence[str] = ()
    ) -> None:
        self.base = base
        self.texts = {k: [s for s in v if s] for k, v in texts.items()}
        self.extra_chars = list(extra_chars)
        work = base
        if self.extra_chars:
            work = with_characters(base, self.extra_chars)
        self.work = work
        self.ignore_merges = base.ignore_merges
        sp = not base.is_byte_level and base.is_sentencepiece_style
        self.units: list[tuple[str, ...]] = []
        unit_index: dict[tuple[str, ...], int] = {}
        self.lines: dict[str, list[list[int]]] = {}
        self.line_bytes: dict[str, list[int]] = {}
        if base.dropout:
            tk = work.fresh_tokenizer()
            tk.model.dropout = None
        else:
            tk = work.tokenizer  # read-only use of the shared tokenizer
        for name, lines in self.texts.items():
            rows: list[list[int]] = []
            for enc in tk.encode_batch(list(lines), add_special_tokens=False):
                row: list[int] = []
                cur: list[str] = []
                prev_w = None
                for t, w in zip(enc.tokens, enc.word_ids):
                    boundary = w != prev_w or (
                        sp and cur and t[0] == SPIECE_UNDERLINE and cur[-1][-1] != SPIECE_UNDERLINE
                    )
                    if boundary and cur:
                        key = tuple(cur)
                        i = unit_index.get(key)
                        if i is None:
                            i = unit_index[key] = len(self.units)
                            self.units.append(key)
                        row.append(i)
                        cur = []
                    cur.append(t)
                    prev_w = w
                if cur:
                    key = tuple(cur)
                    i = unit_index.get(key)
                    if i is None:
                        i = unit_index[key] = len(self.units)
                        self.units.append(key)
                    row.append(i)
                rows.append(row)
            self.lines[name] = rows
            self.line_bytes[name] = [len(s.encode("utf-8")) for s in lines]
        self.unit_counts: dict[str, Counter] = {
            name: Counter(i for row in rows for i in row) for name, rows in self.lines.items()
        }
        self.base_ids = {**work.vocab, **{a.content: a.id for a in work.added_tokens}}
        self._base_line_tokens = {name: self.line_tokens(name, {}) for name in self.lines}

    # ------------------------------------------------------------------ core
    def segment(
        self, merges: Merges, new_tokens: Sequence[str], names: Iterable[str] | None = None
    ) -> dict[int, tuple[str, ...]]:
        """unit index → its segmentation under base + appended merges (only units that change).

        Each unit is the base segmentation of a pre-token (final under the base merges); the appended merges
        run over it by the replay's merge loop (:class:`analysis.bpe.MergeTable`).
        """
        table = _table(merges)
        newset = set(new_tokens)
        drop = {c for c in self.extra_chars if c not in newset}
        wanted = set()
        for name in names or self.lines:
            wanted.update(self.unit_counts[name])
        out: dict[int, tuple[str, ...]] = {}
        if not len(table) and not drop:
            return out
        lefts = table.lefts
        for i in wanted:
            u = self.units[i]
            if not drop and (len(u) < 2 or not any(t in lefts for t in u[:-1])):
                if not (self.ignore_merges and len(u) > 1 and "".join(u) in newset):
                    continue
            seg = _merged(_without(u, drop), table, newset if self.ignore_merges else None)
            if seg != u:
                out[i] = seg
        return out

    def line_tokens(self, name: str, changed: dict[int, tuple[str, ...]]) -> list[list[str]]:
        """Token strings per line of one text under a segmentation from :meth:`segment`."""
        units = self.units
        return [[t for i in row for t in changed.get(i, units[i])] for row in self.lines[name]]

    def measure(
        self, merges: Merges, new_tokens: Sequence[str], names: Iterable[str] | None = None
    ) -> dict[str, dict]:
        """Per text: bytes, tokens, bytes_per_token and new-token usage counts for a prefix."""
        names = list(names or self.lines)
        changed = self.segment(merges, new_tokens, names)
        newset = set(new_tokens)
        out = {}
        for name in names:
            n_tok = 0
            used: Counter = Counter()
            units = self.units
            for i, c in self.unit_counts[name].items():
                seg = changed.get(i, units[i])
                n_tok += c * len(seg)
                for t in seg:
                    if t in newset:
                        used[t] += c
            out[name] = self._measurement(name, n_tok, used)
        return out

    def _measurement(self, name: str, n_tok: int, used: dict[str, int]) -> dict:
        """bytes, tokens, bytes/token and new-token counts of one text."""
        n_bytes = sum(self.line_bytes[name])
        return {
            "bytes": n_bytes,
            "tokens": n_tok,
            "bytes_per_token": n_bytes / n_tok if n_tok else 0.0,
            "new_token_counts": used,
        }

    # ------------------------------------------------------------------ add_tokens
    def measure_added(self, contents: Sequence[str], names: Iterable[str] | None = None) -> dict[str, dict]:
        """Like :meth:`measure` for tokens added as non-normalized `added_tokens` (leftmost-longest split)."""
        names = list(names or self.lines)
        out = {}
        rows = self.added_line_tokens(contents, names)
        newset = {ADDED_MARK + c for c in contents}
        for name in names:
            toks = rows[name]
            n_tok = sum(map(len, toks))
            used = Counter(t for row in toks for t in row if t in newset)
            out[name] = self._measurement(name, n_tok, used)
        return out

    def added_line_tokens(self, contents: Sequence[str], names: Iterable[str]) -> dict[str, list[list[str]]]:
        """Token strings per line when `contents` are added tokens (raw-text split, base for the rest).

        A match of a new added token is returned as `ADDED_MARK + content`.
        """
        names = list(names)
        if not contents:
            return {n: self._base_line_tokens[n] for n in names}
        rx = re.compile("|".join(re.escape(c) for c in sorted(set(contents), key=len, reverse=True)))
        existing = sorted({a.content for a in self.base.added_tokens}, key=len, reverse=True)
        rx_all = re.compile(
            "|".join(re.escape(c) for c in sorted(set(contents) | set(existing), key=len, reverse=True))
        )
        tk = self.base.tokenizer
        newset = set(contents)
        out = {}
        for name in names:
            pieces_per_line: list[list[tuple[str, bool]]] = []
            todo: set[str] = set()
            for line in self.texts[name]:
                if rx.search(line) is None:
                    pieces_per_line.append([(line, False)])
                    continue
                parts: list[tuple[str, bool]] = []
                pos = 0
                for m in rx_all.finditer(line):
                    if m.start() > pos:
                        parts.append((line[pos : m.start()], False))
                        todo.add(line[pos : m.start()])
                    parts.append((m.group(0), True))
                    pos = m.end()
                if pos < len(line):
                    parts.append((line[pos:], False))
                    todo.add(line[pos:])
                pieces_per_line.append(parts)
            todo_l = sorted(todo)
            encoded = dict(zip(todo_l, (e.tokens for e in tk.encode_batch(todo_l, add_special_tokens=False))))
            rows = []
            for li, parts in enumerate(pieces_per_line):
                if len(parts) == 1 and not parts[0][1]:
                    rows.append(self._base_line_tokens[name][li])
                    continue
                row: list[str] = []
                for p, is_added in parts:
                    row.extend([ADDED_MARK + p if p in newset else p] if is_added else encoded[p])
                rows.append(row)
            out[name] = rows
        return out

    def ids(self, tokens: Sequence[str], new_ids: dict[str, int]) -> list[int]:
        """Map token strings to ids (new tokens first, then the base vocabulary and added tokens)."""
        b = self.base_ids
        return [new_ids[t] if t in new_ids else b[t] for t in tokens]

    def base_line_tokens(self, name: str) -> list[list[str]]:
        """Base tokenization (token strings) of each line of one text."""
        return self._base_line_tokens[name]


def levenshtein(a: Sequence, b: Sequence) -> int:
    """Edit distance between two sequences (insertions, deletions, substitutions cost 1)."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def tokenization_change(base_rows: Sequence[Sequence], new_rows: Sequence[Sequence]) -> dict[str, float]:
    """Exact-match share and mean normalised Levenshtein distance between two tokenizations (Purason et al. 2025, Table 6).

    The distance of a sentence is the edit distance between the token sequences divided by the base length.
    """
    if not base_rows:
        return {"exact_match": float("nan"), "levenshtein": float("nan"), "levenshtein_max": float("nan")}
    em = 0
    dists = []
    for a, b in zip(base_rows, new_rows):
        a, b = list(a), list(b)
        if a == b:
            em += 1
            dists.append(0.0)
        else:
            dists.append(levenshtein(a, b) / max(1, len(a)))
    return {
        "exact_match": em / len(base_rows),
        "levenshtein": sum(dists) / len(dists),
        "levenshtein_max": max(dists),
    }


def stt_model_tokenize(base: LoadedTokenizer, extra_chars: Sequence[str] = ()) -> Callable[[str], list]:
    """`model.tokenize` with ignore_merges off and no dropout (of base plus extra characters, if any)."""
    if not extra_chars:
        return stt_tokenize_fn(base)
    return with_characters(base, list(extra_chars)).fresh_tokenizer(merges_only=True).model.tokenize


def simulated_unreachable(
    base: LoadedTokenizer,
    merges: Merges,
    new_tokens: Sequence[str],
    extra_chars: Sequence[str] = (),
    tokenize: Callable[[str], list] | None = None,
) -> list[str]:
    """STT of the new tokens of a prefix without building the tokenizer (model only, ignore_merges off).

    Each new token's string is segmented by the base model (Rust, ignore_merges off, no dropout), then
    re-merged with the appended merges; it is unreachable unless that gives exactly the token itself.
    """
    if tokenize is None:
        tokenize = stt_model_tokenize(base, extra_chars)
    table = _table(merges)
    newset = set(new_tokens)
    chars = set(extra_chars)
    drop = {c for c in chars if c not in newset}
    out = []
    for t in new_tokens:
        if t in chars:
            continue
        unit = _without(tuple(x.value for x in tokenize(t)), drop)
        if table.apply(unit) != (t,):
            out.append(t)
    return out
