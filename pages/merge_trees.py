"""Merge trees: how BPE builds a token (or every token of a text); node labels carry the merge ranks."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis import LoadedTokenizer
from analysis.bpe import explain_unreachable, get_replay, merge_tree, tree_depth, vocabulary_structure
from analysis.views.vocab_views import search_tokens
from ui import links
from ui.pickers import BPE, pick_tokenizer
from ui.trees import depth_slider, forest_rows, merge_tree_figure
from ui.workspace import keep, unless_kept

#: The page inputs kept in the workspace.
KEPT = ("mt-tok", "mt-mode", "mt-text")

MAX_MATCHES = 200
MAX_TEXT_TOKENS = 80
MODES = ["One token", "Every token of a text"]


def read_link() -> None:
    """When the page is opened with `?token=` (a raw token or `#id`), show that token."""
    token = st.query_params.get("token") if links.opened() else None
    if token:
        st.session_state["mt-q"] = token[:200]
        st.session_state["mt-mode"] = MODES[0]
        for k in ("mt-pick", "mt-next"):
            st.session_state.pop(k, None)


def token_view(tok: LoadedTokenizer) -> None:
    """Search a token, draw its tree, explain unreachability, list the tokens built on it."""
    q = st.text_input(
        "Search a token (text or raw form; `#123` for an id)", key="mt-q", placeholder="e.g. ing, ▁the, #1000"
    )
    if not q:
        st.info("Type part of a token to search the vocabulary.")
        return
    matches = search_tokens(tok, q, MAX_MATCHES)
    if not matches:
        st.warning(f"No vocabulary token contains {q!r}.")
        return
    tid = st.selectbox(
        f"Token ({len(matches)}{'+' if len(matches) >= MAX_MATCHES else ''} match{'' if len(matches) == 1 else 'es'})",
        matches,
        key="mt-pick",
        format_func=lambda i: f"{i} · {tok.readable(tok.id_to_token[i])!r}",
    )
    if tid is None:
        return
    raw = tok.id_to_token[tid]
    st.query_params["token"] = raw
    tree = merge_tree(tok, raw)
    token_metrics(tok, tid, tree)
    st.plotly_chart(merge_tree_figure(tok, [tree], depth_slider(tree_depth(tree), "mt-depth", 6)),
                    width="stretch", key="mt-tree")  # fmt: skip
    if tree.get("reachable") is False and not tree.get("added"):
        why_unreachable(tok, raw)
    built_on(tok, tid)


def token_metrics(tok: LoadedTokenizer, tid: int, tree: dict) -> None:
    """id, reachability, depth, final merge rank, how many tokens are built on it, leaf/atomic."""
    vs = vocabulary_structure(tok)
    c = st.columns(5)
    c[0].metric("id", tid)
    added = tree.get("added") or tid in tok.added_ids
    status = "added" if added else ("yes" if tree.get("reachable") else "NO")
    c[1].metric("Reachable", status, help="Does BPE rebuild the token from its own string (merges only)?")
    c[2].metric("Depth", tree_depth(tree))
    c[3].metric("Final merge rank", "—" if tree.get("rank") is None else f"#{tree['rank']}")
    c[4].metric("Tokens built on it", len(vs.children_of(tid)), help="tokens whose final merge uses this one")
    kind = [label for ids, label in ((vs.atomic, "atomic (alphabet)"), (vs.leaves, "leaf (no merge uses it)"))
            if tid in ids]  # fmt: skip
    if kind:
        st.caption(" · ".join(kind))


def why_unreachable(tok: LoadedTokenizer, raw: str) -> None:
    """The merge that would make the token and the earlier merge that wins."""
    e = explain_unreachable(tok, raw)
    st.subheader("Why it is unreachable")
    st.info(e["reason"][0].upper() + e["reason"][1:] + ".", icon=":material/lightbulb:")
    r = tok.readable
    rows = [
        {
            "would-be merge": f"{r(c['left'])!r} + {r(c['right'])!r}",
            "rank": c["rank"],
            "left reachable": c["left_reachable"],
            "right reachable": c["right_reachable"],
            "earlier merge that wins": ""
            if not c["blocked_by"]
            else f"#{c['blocked_by']['rank']} {r(c['blocked_by']['left'])!r} + {r(c['blocked_by']['right'])!r}",
        }
        for c in e["candidates"]
    ]
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    if tok.ignore_merges:
        st.caption(
            f"{tok.name} uses ignore_merges: this token is still produced when a whole pre-token equals it."
        )


def built_on(tok: LoadedTokenizer, tid: int) -> None:
    """The tokens whose final merge uses this token, with a way to open one of them."""
    vs = vocabulary_structure(tok)
    built = vs.children_of(tid)
    st.subheader(f"Tokens built on it ({len(built)})")
    if not built:
        st.caption("No merge uses this token as a part.")
        return
    name = tok.id_to_token
    rows = []
    for t in sorted(built, key=lambda x: vs.final_rank.get(x, 0)):
        a, b = vs.split[t]
        rows.append({"id": t, "token": tok.readable(name[t]), "rank": vs.final_rank.get(t), "depth": vs.depth.get(t),
                     "merge": f"{tok.readable(name[a])!r} + {tok.readable(name[b])!r}"})  # fmt: skip
    table = pd.DataFrame(rows, columns=["id", "token", "merge", "rank", "depth"])
    st.dataframe(table, hide_index=True, width="stretch", height=min(400, 36 * len(rows) + 40))
    nxt = st.selectbox(
        "Open one of them",
        ["—"] + [r["id"] for r in rows[:500]],
        key="mt-next",
        format_func=lambda i: i if i == "—" else f"{i} · {tok.readable(name[i])!r}",
    )
    if nxt != "—":
        st.button("Open", key="mt-open", on_click=_open_token, args=(nxt,))


def _open_token(tid: int) -> None:
    """Button callback: show another token (runs before the widgets are built)."""
    st.session_state["mt-q"] = f"#{tid}"
    st.session_state.pop("mt-next", None)
    st.session_state.pop("mt-pick", None)


def text_view(tok: LoadedTokenizer) -> None:
    """Type a text and see the tree of every token it is split into."""
    text = st.text_area(
        "Text", unless_kept("mt-text", "Tokenization is unbelievably fun.", ""), key="mt-text", height=100
    )
    if not text:
        st.info("Type some text.")
        return
    trees = get_replay(tok).text_trees(text)
    if [t["token"] for t in trees] != tok.tokenizer.encode(text, add_special_tokens=False).tokens:
        st.warning("The step-wise replay and the tokenizers library disagree on this text.")  # never expected
    more = f"; the first {MAX_TEXT_TOKENS} are drawn" if len(trees) > MAX_TEXT_TOKENS else ""
    st.caption(f"{len(trees)} tokens{more}")
    trees = trees[:MAX_TEXT_TOKENS]
    show = depth_slider(max((tree_depth(t) for t in trees), default=1), "mt-tdepth", 4)
    for k, row in enumerate(forest_rows(trees, show)):  # wrapped like text: labels never overlap
        st.plotly_chart(merge_tree_figure(tok, row, show), width="stretch", key=f"mt-forest-{k}")
    rows = [
        {
            "token": tok.readable(t["token"]) if not t.get("added") else t["token"],
            "id": t["id"],
            "final merge rank": t.get("rank"),
            "depth": tree_depth(t),
            "note": "special/added"
            if t.get("added")
            else ("merges skipped (ignore_merges)" if t.get("merge_skipped") else ""),
        }
        for t in trees
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def page() -> None:
    """Tokenizer (BPE) and a token or a text → merge trees."""
    st.title("Merge trees")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption(
        "How the BPE merges build a token from its own string (merges only, ignore_merges off, no dropout), "
        "or every token of a text (the tokenizer's own pipeline). Node labels show the token and, below it, the "
        "rank of the merge that made it; the legend above the tree names every kind of node."
    )
    read_link()
    tok = pick_tokenizer("Tokenizer", key="mt-tok", needs=BPE, feature="Merge trees")
    if tok is None:
        return
    mode = st.radio("Show", MODES, key="mt-mode", horizontal=True)
    if mode == MODES[0]:
        token_view(tok)
    else:
        text_view(tok)


page()
