"""Token spans: one text as coloured tokens (id and bytes on hover), the one rendering every page uses.

Show them with `st.html(...)`.
"""

from __future__ import annotations

import html

from analysis.tokenizer.tokenizer import LoadedTokenizer

PALETTE = ["#fde68a", "#bfdbfe", "#bbf7d0", "#fbcfe8", "#ddd6fe", "#fed7aa", "#a5f3fc", "#e5e7eb"]

CSS = """
<style>
.tl-spans{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:0.95rem;line-height:2.0;
  white-space:pre-wrap;word-break:break-word}
.tl-tok{border-radius:3px;padding:1px 0;margin:0 1px;border:1px solid rgba(0,0,0,0.08)}
.tl-tok.tl-diff{outline:2px solid #dc2626;outline-offset:-1px}
.tl-tok.tl-special{background:#1f2937 !important;color:#f9fafb}
.tl-ws{color:#9ca3af}
</style>
"""


def visible_whitespace(s: str) -> str:
    """Make spaces, tabs and newlines visible (· → ⇥ ↵)."""
    return s.replace(" ", "·").replace("\t", "⇥").replace("\n", "↵\n")


def overlapping(offsets: list[tuple[int, int]]) -> list[bool]:
    """Per token, whether its character span overlaps another token's: byte-level tokens that split one character
    each get the whole character's offsets (`(0, 1)` twice, or `(0, 1)` then `(0, 2)` when the second one goes on
    into the next character)."""
    n = len(offsets)
    out = [False] * n
    last_end, last_k = -1, -1  # the furthest end among the earlier tokens, and that token
    for k, (start, end) in enumerate(offsets):
        if end <= start:  # a token with no text (a special token the post-processor added)
            continue
        if start < last_end:
            out[k] = out[last_k] = True
        if end > last_end:
            last_end, last_k = end, k
    return out


def token_spans_html(
    tok: LoadedTokenizer,
    text: str,
    ids: list[int],
    offsets: list[tuple[int, int]],
    *,
    show_whitespace: bool = False,
    show_bytes: bool = False,
    boundaries_elsewhere: set[int] | None = None,
    raws: list[str] | None = None,
) -> str:
    """Coloured spans for one encoding; a token whose end is not a boundary elsewhere gets a red outline.

    `raws` gives the raw token strings directly (tokens with no id, e.g. dynamic merges, have id -1).
    """
    id_to_token = tok.id_to_token
    specials = tok.added_ids
    parts = [CSS, '<div class="tl-spans">']
    shared = overlapping(offsets)
    for k, (tid, (start, end)) in enumerate(zip(ids, offsets)):
        raw = raws[k] if raws is not None else id_to_token.get(tid, "")
        b = tok.token_bytes(raw) if tid not in specials else raw.encode()
        piece = text[start:end] if end > start else tok.readable(raw)
        # a token that shares a character with its neighbour (byte-level pieces of one character) shows its own
        # bytes: the text under its offsets would repeat the shared character ("ППривет")
        shown = tok.readable(raw) if (show_bytes or end <= start or shared[k]) else piece
        if show_bytes:
            shown = " ".join(f"{x:02X}" for x in b) or shown
        if show_whitespace and not show_bytes:
            shown = visible_whitespace(shown)
        cls = "tl-tok"
        if tid in specials:
            cls += " tl-special"
        if boundaries_elsewhere is not None and end not in boundaries_elsewhere:
            cls += " tl-diff"
        title = f"{f'id {tid}' if tid >= 0 else 'new token'} · raw {raw!r} · {len(b)} bytes: {b.hex(' ')}"
        colour = PALETTE[k % len(PALETTE)]
        parts.append(
            f'<span class="{cls}" style="background:{colour}" title="{html.escape(title)}">'
            f"{html.escape(shown)}</span>"
        )
    parts.append("</div>")
    return "".join(parts)


def pieces_html(pieces: list[str], *, show_whitespace: bool = True) -> str:
    """Coloured spans for token strings without offsets (e.g. an edited tokenizer's pieces), same style."""
    parts = [CSS, '<div class="tl-spans">']
    for k, piece in enumerate(pieces):
        shown = visible_whitespace(piece).replace("\n", "") if show_whitespace else piece
        colour = PALETTE[k % len(PALETTE)]
        parts.append(f'<span class="tl-tok" style="background:{colour}">{html.escape(shown)}</span>')
    parts.append("</div>")
    return "".join(parts)
