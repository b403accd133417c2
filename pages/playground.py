"""Playground: one text, several tokenizers side by side; the state is shareable through the URL."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.tokenizer.defaults import SAMPLE_TEXT
from analysis.views.playground import EncodingView, boundary_diff, compare_encodings
from ui import links
from ui.library import library, source_of
from ui.pickers import pick_tokenizers
from ui.spans import token_spans_html, visible_whitespace

#: The only query parameters read, as plain strings (never unpickled or evaluated).
ALLOWED = ("t", "text", "ws", "bytes", "special")
FLAGS = (("ws", "pg-ws"), ("bytes", "pg-bytes"), ("special", "pg-special"))


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
    if qp.get("text"):
        st.session_state["pg-text"] = qp["text"][0][:20000]
    for flag, key in FLAGS:
        if qp.get(flag):
            st.session_state[key] = qp[flag][0] == "1"


def write_link(names: list[str], text: str, flags: dict[str, bool]) -> None:
    """Write the shareable state back to the URL; say which tokenizers a link cannot restore."""
    st.query_params.from_dict(
        {"t": [links.tokenizer_ref(n) for n in names], "text": text[:2000]}
        | {flag: str(int(flags[flag])) for flag, _ in FLAGS}
    )
    unshareable = [n for n in names if source_of(n) is None]
    if unshareable:
        st.caption(
            "Uploads and edited tokenizers live only in this session: a shared link cannot restore "
            + ", ".join(unshareable)
            + "."
        )


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
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


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
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=min(400, 35 * len(rows) + 40))
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
        st.html(token_spans_html(tok, text, r.ids, r.offsets, show_whitespace=flags["ws"],
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


def page() -> None:
    """Tokenizers and text → encodings side by side → coloured spans."""
    st.title("Playground")
    read_link()
    lib = library()
    names = pick_tokenizers("Tokenizers (up to 8)", key="pg-toks", max_n=8, default=list(lib)[:4])
    st.session_state.setdefault("pg-text", SAMPLE_TEXT)  # a link may have set it: no second default
    text = st.text_area("Text", key="pg-text", height=140)
    c1, c2, c3 = st.columns(3)
    flags = {
        "ws": c1.toggle("Show whitespace", key="pg-ws"),
        "bytes": c2.toggle("Show bytes", key="pg-bytes"),
        "special": c3.toggle("Add special tokens", key="pg-special"),
    }
    write_link(names, text, flags)
    if not names:
        st.info("Pick at least one tokenizer.")
        return
    if not text:
        st.info("Type some text.")
        return
    toks = [lib[n] for n in names]
    results = compare_encodings(toks, text, add_special_tokens=flags["special"])
    comparison_table(names, results)
    if len(names) > 1:
        diff_table(names, text, results)
    encodings(names, toks, text, results, flags)
    merge_tree_link(names, results)


page()
