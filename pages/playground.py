"""Playground: one text, several tokenizers side by side. The tokenizers, a text of up to 2,000 characters and the
toggles are in the URL; the whole state is kept in the workspace; *Share link* makes a link for someone else (a
longer text is kept on the server for that link under a random id)."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from analysis.tokenizer.defaults import SAMPLE_TEXT
from analysis.views.decode import decode_ids, parse_ids
from analysis.views.playground import EncodingView, boundary_diff, compare_encodings
from analysis.views.runtime import switched_off_note
from analysis.views.shared_text import URL_TEXT_MAX, load_text, share_text
from ui import links, workspace
from ui.errors import try_step
from ui.library import library, source_of
from ui.pickers import most_recent, pick_tokenizers
from ui.spans import token_spans_html, visible_whitespace
from ui.tables import static_table

#: The only query parameters read, as plain strings (never unpickled or evaluated).
ALLOWED = ("t", "text", "textid", "spaces", "bytes", "special")
#: The pause after the last keystroke before the Playground updates, in "Update while typing" mode.
LIVE_PAUSE = "250ms"
FLAGS = (("spaces", "pg-ws"), ("bytes", "pg-bytes"), ("special", "pg-special"))
#: The inputs kept in the workspace (restored after a reload or a restart).
KEPT = ("pg-toks", "pg-text", "pg-live", "pg-live-text", "pg-ws", "pg-bytes", "pg-special", "pg-dec-tok",
        "pg-dec-skip", "pg-dec-ids")  # fmt: skip


def read_link() -> None:
    """When the page is opened: tokenizers (allow-listed sources), text and toggles from the URL."""
    if not links.opened():
        return
    qp = {k: st.query_params.get_all(k) for k in ALLOWED if k in st.query_params}
    chosen: list[str] = []
    for src in qp.get("t", [])[:8]:
        name = links.name_from_link(src)
        if name and name not in chosen:
            chosen.append(name)
    if chosen:
        st.session_state["pg-toks"] = chosen
    if qp.get("textid"):
        stored = load_text(qp["textid"][0])
        if stored is None:
            st.warning("The link's text is no longer on this server (the workspace that shared it was deleted "
                       "or expired): the sample text is shown instead.")  # fmt: skip
        else:
            st.session_state["pg-text"] = stored
    elif qp.get("text"):
        st.session_state["pg-text"] = qp["text"][0][:URL_TEXT_MAX]
    for flag, key in FLAGS:
        if qp.get(flag):
            st.session_state[key] = qp[flag][0] == "1"


def write_link(names: list[str], text: str, flags: dict[str, bool]) -> None:
    """Keep the URL in step with the page: tokenizers, the text when it is short enough for a URL (a longer one is
    kept in the workspace only), the toggles and the workspace id. Nothing is written to the server's disk."""
    text_part = {"text": text} if len(text) <= URL_TEXT_MAX else {}
    st.query_params.from_dict(
        {"t": [links.tokenizer_ref(n) for n in names]}
        | text_part
        | {flag: str(int(flags[flag])) for flag, _ in FLAGS}
        | {workspace.PARAM: workspace.current()}
    )


def share_link(names: list[str], text: str, flags: dict[str, bool]) -> None:
    """*Share link*: a link for someone else (no workspace id). A text longer than a URL holds is kept on the
    server for the link under a random id — only when this button is pressed."""
    if not st.button("Share link", key="pg-share", icon=":material/share:",
                     help="A link that opens this comparison in any browser (not your workspace)"):  # fmt: skip
        return
    shareable = [n for n in names if (source_of(n) or "").startswith(links.URL_SOURCES)]
    params: dict[str, str | list[str]] = {"t": [links.tokenizer_ref(n) for n in shareable]}
    if len(text) <= URL_TEXT_MAX:
        params["text"] = text
    else:
        sid = try_step(share_text, workspace.current(), text)
        if sid is None:
            return
        params["textid"] = sid
    params |= {flag: str(int(flags[flag])) for flag, _ in FLAGS}
    base = st.context.url or "./playground"
    st.code(f"{base}?{urlencode(params, doseq=True)}", language=None, wrap_lines=True)
    st.caption("Copy the link with the button at its right.")
    unshareable = [n for n in names if n not in shareable]
    if unshareable:
        st.caption("Uploads and edited tokenizers live in your workspace: the link cannot open "
                   + ", ".join(unshareable) + ".")  # fmt: skip


def comparison_table(names: list[str], results: list[EncodingView]) -> None:
    """Counts and compression per tokenizer."""
    rows = [
        {
            "tokenizer": n,
            "tokens": r.n_tokens,
            "bytes/token": round(r.bytes_per_token, 3),
            "chars/token": round(r.chars_per_token, 3),
            "differing boundaries": r.n_differing,
        }
        for n, r in zip(names, results)
    ]
    static_table(pd.DataFrame(rows))


def diff_table(names: list[str], text: str, results: list[EncodingView]) -> None:
    """The compact diff: only the stretches of the text that the tokenizers split differently, side by side."""
    diff = boundary_diff(text, results)
    st.markdown(f"**Where the boundaries differ** ({len(diff)} stretch{'es' if len(diff) != 1 else ''})")
    if not diff:
        st.caption("All chosen tokenizers put their token boundaries in the same places on this text.")
        return
    rows = [{"text": visible_whitespace(d.text).replace("\n", "")}
            | {n: " | ".join(visible_whitespace(p).replace("\n", "") for p in pieces) for n, pieces in zip(names, d.pieces)}
            for d in diff]  # fmt: skip
    static_table(pd.DataFrame(rows), height=400)
    st.caption("Each row is a stretch between two boundaries every tokenizer shares; `|` separates its tokens "
               "(`·` is a space). Stretches all tokenizers split alike are left out.")  # fmt: skip


def encodings(
    names: list[str], toks: list, text: str, results: list[EncodingView], flags: dict[str, bool]
) -> None:
    """Per tokenizer: the coloured tokens and the id sequence (a code block with a copy button)."""
    st.caption("Tokens outlined in red end where at least one other tokenizer has no boundary. Hover a token for its "
               "raw form and bytes; the ids below each text can be copied with the button at their right.")  # fmt: skip
    for n, tok, r in zip(names, toks, results):
        st.markdown(f"**{n}** · {r.n_tokens} tokens")
        boundaries = r.common_boundaries if len(toks) > 1 else None
        st.html(token_spans_html(tok, text, r.ids, r.offsets, show_whitespace=flags["spaces"],
                                 show_bytes=flags["bytes"], boundaries_elsewhere=boundaries))  # fmt: skip
        st.code(" ".join(map(str, r.ids)), language=None, wrap_lines=True)


def merge_tree_link(names: list[str], results: list[EncodingView]) -> None:
    """Open the merge tree of one token of a BPE tokenizer's encoding (on the Merge trees page)."""
    lib = library()
    bpe = {n: r for n, r in zip(names, results) if lib[n].model_type == "BPE"}
    if not bpe:
        return
    c1, c2, c3 = st.columns([2, 3, 1])
    which = c1.selectbox("Merge tree of a token from", list(bpe), key="pg-tree-tok")
    tok = lib[which]
    tid = c2.selectbox(
        "Token",
        list(dict.fromkeys(bpe[which].ids)),
        format_func=lambda i: f"{tok.readable(tok.id_to_token.get(i, ''))!r} · id {i}",
        key="pg-tree-id",
    )
    c3.write("")
    if c3.button("Open merge tree", key="pg-open-tree") and tid is not None:
        links.open_merge_tree(which, int(tid))


def decode_box(names: list[str]) -> None:
    """Ids → text with one of the chosen tokenizers (ids pasted as `1 2 3` or `[1, 2, 3]`)."""
    lib = library()
    with st.expander("Decode ids → text", expanded=bool(st.session_state.get("pg-dec-ids"))):
        c1, c2 = st.columns([1, 3])
        options = names or list(lib)
        if st.session_state.get("pg-dec-tok") not in options:  # first the tokenizer added last
            st.session_state["pg-dec-tok"] = most_recent(options)
        which = c1.selectbox("Decode with", options, key="pg-dec-tok")
        skip = c1.toggle("Skip special tokens", key="pg-dec-skip")
        raw = c2.text_area(
            "Token ids", key="pg-dec-ids", height=90, placeholder="15496 11 995   or   [15496, 11, 995]"
        )
        if not raw.strip() or which is None:
            return
        out = try_step(lambda: decode_ids(lib[which], parse_ids(raw), skip_special=skip))
        if out is None:
            return
        if out.unknown:
            st.warning(f"{len(out.unknown)} id(s) are outside {which}'s vocabulary and were left out: "
                       + ", ".join(map(str, out.unknown[:20])) + ("…" if len(out.unknown) > 20 else ""))  # fmt: skip
        left_out = len(out.ids) - out.n_decoded
        st.markdown(f"**Text** ({out.n_decoded:,} of {len(out.ids):,} ids decoded)" if left_out
                    else f"**Text** ({out.n_decoded:,} ids)")  # fmt: skip
        st.code(out.text, language=None, wrap_lines=True)
        st.dataframe(pd.DataFrame([{"Id": t.id, "Token": t.token, "Text": t.readable, "Special": t.special}
                                   for t in out.tokens]), hide_index=True, width="stretch",
                     height=min(220, 35 * (len(out.tokens) + 1) + 3))  # fmt: skip


#: How the one-line live box shows a line break (U+2424 SYMBOL FOR NEWLINE): the text keeps its line breaks, they
#: are tokenized as line breaks and come back in the multi-line box.
NEWLINE_MARK = "\u2424"


def _switch_live() -> None:
    """Carry the text between the multi-line box and the live one-line box when the mode changes (line breaks
    travel as NEWLINE_MARK in the one-line box)."""
    if st.session_state.get("pg-live"):
        text = st.session_state.get("pg-text", SAMPLE_TEXT)
        st.session_state["pg-live-text"] = text.replace("\n", NEWLINE_MARK)
    else:
        st.session_state["pg-text"] = st.session_state.get("pg-live-text", "").replace(NEWLINE_MARK, "\n")


def text_box() -> str:
    """The text: a multi-line box (updates on Ctrl+Enter or leaving it), or with "Update while typing" a one-line
    box that updates after a pause in typing (Streamlit's `live` text input; a text area has no live mode)."""
    st.session_state.setdefault("pg-text", SAMPLE_TEXT)  # a link may have set it: no second default
    live = st.toggle("Update while typing", key="pg-live", on_change=_switch_live,
                     help=f"Re-tokenize {LIVE_PAUSE} after the last keystroke. The live box holds one line: a line "
                          f"break shows as {NEWLINE_MARK}, is tokenized as a line break and comes back when you "
                          "switch this off.")  # fmt: skip
    if live:
        text = st.text_input("Text", key="pg-live-text", live=LIVE_PAUSE).replace(NEWLINE_MARK, "\n")
        st.session_state["pg-text"] = text  # the shared link and the switch back read it
        return text
    return st.text_area("Text", key="pg-text", height=140)


def page() -> None:
    """Tokenizers and text → encodings side by side → coloured spans."""
    st.title("Playground")
    workspace.keep(*KEPT)
    read_link()
    lib = library()
    names = pick_tokenizers("Tokenizers (up to 8)", key="pg-toks", max_n=8, recent=4)
    text = text_box()
    c1, c2, c3 = st.columns(3)
    flags = {
        "spaces": c1.toggle("Show whitespace", key="pg-ws"),
        "bytes": c2.toggle("Show bytes", key="pg-bytes"),
        "special": c3.toggle("Add special tokens", key="pg-special"),
    }
    write_link(names, text, flags)
    share_link(names, text, flags)
    if not names:
        st.info("Pick at least one tokenizer.")
        return
    decode_box(names)
    if not text:
        st.info("Type some text.")
        return
    toks = [lib[n] for n in names]
    for n, t in zip(names, toks):
        note = switched_off_note(t, n)
        if note:
            st.caption(note)
    results = compare_encodings(toks, text, add_special_tokens=flags["special"])
    comparison_table(names, results)
    if len(names) > 1:
        diff_table(names, text, results)
    encodings(names, toks, text, results, flags)
    merge_tree_link(names, results)


page()
