"""Playground: one text, several tokenizers side by side; the state is shareable through the URL."""

import pandas as pd
import streamlit as st

from analysis.playground import compare_encodings
from ui import state
from ui.render import token_spans_html

st.title("Playground")

# ------------------------------------------------------------------------------------------ URL state
# Only these query parameters are read, as plain strings (never unpickled or evaluated).
ALLOWED = {"t", "text", "ws", "bytes", "special"}
if "pg-init" not in st.session_state:
    qp = {k: st.query_params.get_all(k) for k in ALLOWED if k in st.query_params}
    chosen: list[str] = []
    for src in qp.get("t", [])[:8]:
        name = state.name_from_link(src)
        if name and name not in chosen:
            chosen.append(name)
    if chosen:
        st.session_state["pg-toks"] = chosen
    if qp.get("text"):
        st.session_state["pg-text"] = qp["text"][0][:20000]
    for flag, key in (("ws", "pg-ws"), ("bytes", "pg-bytes"), ("special", "pg-special")):
        if qp.get(flag):
            st.session_state[key] = qp[flag][0] == "1"
    st.session_state["pg-init"] = True

lib = state.library()
names = state.pick_tokenizers("Tokenizers (up to 8)", key="pg-toks", max_n=8, default=list(lib)[:4])
text = st.text_area("Text", state.sample_text(), key="pg-text", height=140)
c1, c2, c3 = st.columns(3)
show_ws = c1.toggle("Show whitespace", key="pg-ws")
show_bytes = c2.toggle("Show bytes", key="pg-bytes")
add_special = c3.toggle("Add special tokens", key="pg-special")

# write the shareable state back to the URL
sources = [state.source_of(n) or n for n in names]
st.query_params.from_dict(
    {
        "t": sources,
        "text": text[:2000],
        "ws": str(int(show_ws)),
        "bytes": str(int(show_bytes)),
        "special": str(int(add_special)),
    }
)
unshareable = [n for n in names if state.source_of(n) is None]
if unshareable:
    st.caption(
        "Uploads and edited tokenizers live only in this session: a shared link cannot restore "
        + ", ".join(unshareable)
        + "."
    )


def _compare(names: list[str], text: str) -> None:
    """Encodings side by side (a function, so an early exit still lets app.py draw the sidebar)."""
    if not names:
        st.info("Pick at least one tokenizer.")
        return
    if not text:
        st.info("Type some text.")
        return
    toks = [lib[n] for n in names]
    results = compare_encodings(toks, text, add_special_tokens=add_special)

    st.dataframe(
        pd.DataFrame(
            [
                {
                    "tokenizer": n,
                    "tokens": r.n_tokens,
                    "bytes/token": round(r.bytes_per_token, 3),
                    "chars/token": round(r.chars_per_token, 3),
                    "differing boundaries": r.n_differing,
                }
                for n, r in zip(names, results)
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    st.caption(
        "Tokens outlined in red end where at least one other tokenizer has no boundary. Hover a token for "
        "its id and bytes."
    )
    for n, tok, r in zip(names, toks, results):
        st.markdown(f"**{n}** · {r.n_tokens} tokens")
        st.html(
            token_spans_html(
                tok,
                text,
                r.ids,
                r.offsets,
                show_whitespace=show_ws,
                show_bytes=show_bytes,
                boundaries_elsewhere=r.common_boundaries if len(toks) > 1 else None,
            )
        )

    bpe = [(n, t, r) for n, t, r in zip(names, toks, results) if t.model_type == "BPE"]
    if bpe:
        c1, c2, c3 = st.columns([2, 3, 1])
        which = c1.selectbox("Merge tree of a token from", [n for n, _, _ in bpe], key="pg-tree-tok")
        _, t_sel, r_sel = next(x for x in bpe if x[0] == which)
        options = list(dict.fromkeys(r_sel.ids))
        tid = c2.selectbox(
            "Token",
            options,
            format_func=lambda i: f"{t_sel.readable(t_sel.id_to_token.get(i, ''))!r} · id {i}",
            key="pg-tree-id",
        )
        c3.write("")
        if c3.button("Open merge tree", key="pg-open-tree") and tid is not None:
            state.open_merge_tree(which, int(tid))


_compare(names, text)
