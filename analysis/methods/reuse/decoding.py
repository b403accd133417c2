"""How an R-BPE tokenizer decodes (Hamdan, Al Mraikhat, Zaraket, EMNLP 2025): ids are grouped into runs of
mapped (new-tokenizer) and unmapped (old-tokenizer) ids and each run is decoded by its own tokenizer, with the
paper's 1–4-token window pass where a run boundary splits a UTF-8 character; on a plain ByteLevel decoder the runs
decode from the tokens' bytes without the Rust decoder.

:class:`ReuseDecoding` is that part of :class:`~analysis.methods.reuse.reuse.ReuseTokenizer` (its base class): it
reads the tokenizer's fields and the maps its ``__post_init__`` builds."""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from numbers import Integral
from typing import Any

import numpy as np
import tokenizers

from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .classes import REPLACEMENT


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


class ReuseDecoding:
    """The decoding half of :class:`~analysis.methods.reuse.reuse.ReuseTokenizer` (which sets these attributes)."""

    old: LoadedTokenizer
    new: tokenizers.Tokenizer
    replacement_ids: frozenset[int]
    reused_ids: frozenset[int]
    old_to_new: dict[int, int]
    _fast: tuple[list[bytes | None], frozenset[int]] | bool | None
    _reused_mapped: bool

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
