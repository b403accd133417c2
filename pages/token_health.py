"""Token health: the Self-Tokenization Test per category, why tokens are unreachable, and tokens never used."""

from __future__ import annotations

import json
from urllib.parse import quote

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis import AnalysisError
from analysis import flores as fl
from analysis.bpe import (
    CATEGORIES,
    CATEGORY_HELP,
    explain_unreachable,
    merge_candidates_for,
    never_produced,
    stt_report,
)
from ui import state

UNREACHABLE = ["unreachable_multi", "unreachable_other_single", "merge_skip_only"]
LABELS = {
    "reachable": "Reachable",
    "unreachable_multi": "Unreachable (splits)",
    "unreachable_other_single": "Unreachable (other token)",
    "merge_skip_only": "Only via merge skipping",
    "byte_fallback": "Byte-fallback pieces",
    "special": "Special / added",
    "unk": "Unk",
}
SHORT = {
    "reachable": "Reachable",
    "unreachable_multi": "Splits",
    "unreachable_other_single": "Other token",
    "merge_skip_only": "Skip-only",
    "byte_fallback": "Byte pieces",
    "special": "Special",
    "unk": "Unk",
}


@st.cache_resource(show_spinner="Running the Self-Tokenization Test (once per tokenizer)…", max_entries=4)
def _report(key: str, _tok):
    return stt_report(_tok)


@st.cache_resource(show_spinner=False, max_entries=4)
def _table(key: str, _tok) -> pd.DataFrame:
    rep = _report(key, _tok)
    id_to_token = _tok.id_to_token
    df = pd.DataFrame(
        {
            "id": [r.id for r in rep.rows],
            "readable": [r.readable for r in rep.rows],
            "token": [r.token for r in rep.rows],
            "category": [r.category for r in rep.rows],
            "script": [r.script for r in rep.rows],
            "pieces": [
                ""
                if r.category in ("reachable", "special")
                else " | ".join(_tok.readable(id_to_token.get(p, "?")) for p in r.pieces)
                for r in rep.rows
            ],
        }
    )
    df["merge tree"] = "./merge_trees?token=" + df["token"].map(lambda s: quote(s, safe=""))
    return df


@st.cache_data(show_spinner=False, max_entries=8)
def _would_be_ranks(key: str, _tok, ids: tuple[int, ...]) -> dict[int, int | None]:
    """Rank of the lowest merge that would produce each token (None when no merge produces it)."""
    out = {}
    for i in ids:
        c = merge_candidates_for(_tok, _tok.id_to_token[i])
        out[i] = c[0][0] if c else None
    return out


@st.cache_data(show_spinner="Encoding the corpus with the tokenizer…", max_entries=16)
def _never(key: str, data_key: str, _tok, _lines: list[str]) -> list[int]:
    return never_produced(_tok, _lines)


def page() -> None:
    """The whole page."""
    st.title("Token health")
    st.caption(
        "Self-Tokenization Test (paper 000 §3.3): every vocabulary string goes through the bare BPE model "
        "(no normalizer or pre-tokenizer, ignore_merges off, no dropout). A token is reachable when the model "
        "gives back exactly that token; otherwise no input can ever produce it through merges."
    )
    state.preselect_from_link("th-init", "th-tok")  # ?t=example:NAME (or hub:/embedded:)
    lib = state.library()
    names = list(lib)
    if st.session_state.get("th-tok") not in names:
        st.session_state.pop("th-tok", None)
    name = st.selectbox("Tokenizer", names, key="th-tok")
    tok = lib[name]
    if tok.model_type != "BPE":
        st.info(
            f"**{name}** has a {tok.model_type} model. The Self-Tokenization Test applies to BPE merges only — "
            "pick a BPE tokenizer from the sidebar or the Load & inspect page."
        )
        return
    try:
        rep = _report(tok.content_hash, tok)
        df = _table(tok.content_hash, tok)
    except AnalysisError as e:
        state.show_error(e)
        return
    summary = rep.summary()
    if st.session_state.get("th-last") != tok.content_hash:  # new tokenizer: default filters again
        for k in ("th-cats", "th-scripts", "th-explain"):
            st.session_state.pop(k, None)
        st.session_state["th-last"] = tok.content_hash

    # ------------------------------------------------------------------------------------------ counts
    st.metric(
        "Unreachable tokens (STT)", f"{summary['unreachable']:,}", help="unreachable by merges, all kinds"
    )
    cols = st.columns(len(CATEGORIES))
    for c, cat in zip(cols, CATEGORIES):
        c.metric(SHORT[cat], f"{summary[cat]:,}", help=f"{LABELS[cat]}: {CATEGORY_HELP[cat]}")
    if summary["unreachable"] == 0:
        st.success(f"All {summary['reachable']:,} merge-built tokens of {name} are reachable.")
    if tok.ignore_merges and summary["merge_skip_only"]:
        st.info(
            f"{name} uses ignore_merges (merge skipping): its {summary['merge_skip_only']:,} merge-unreachable tokens "
            "are produced only when a whole pre-token equals them."
        )

    # ------------------------------------------------------------------------------------------ table
    st.subheader("Tokens")
    present = [c for c in CATEGORIES if summary[c]]
    default = (
        [c for c in UNREACHABLE if summary[c]] or [c for c in present if c != "reachable"][:1] or present
    )
    f1, f2, f3 = st.columns([2, 2, 1])
    cats = f1.multiselect(
        "Categories", present, default=default, key="th-cats", format_func=lambda c: LABELS.get(c, c)
    )
    q = f2.text_input("Search (readable or raw form)", key="th-q")
    scripts_all = sorted(df.loc[df["category"].isin(cats), "script"].unique()) if cats else []
    scripts = f3.multiselect("Scripts", scripts_all, key="th-scripts")
    view = df[df["category"].isin(cats)]
    if q:
        view = view[
            view["readable"].str.contains(q, case=False, regex=False)
            | view["token"].str.contains(q, regex=False)
        ]
    if scripts:
        view = view[view["script"].isin(scripts)]
    st.caption(f"{len(view):,} of {len(df):,} ids")
    shown = view.head(5000)
    src = state.source_of(name)
    if src:  # a link opens a new browser session: carry a shareable source so it finds the tokenizer
        shown = shown.assign(**{"merge tree": shown["merge tree"] + "&t=" + quote(src, safe="")})
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        column_config={
            "merge tree": st.column_config.LinkColumn("merge tree", display_text="open tree"),
            "pieces": st.column_config.TextColumn("what BPE builds instead"),
        },
        key="th-table",
    )
    if len(view) > 5000:
        st.caption("Showing the first 5,000 rows; the downloads hold all of them.")

    # ------------------------------------------------------------------------------------------ charts
    if len(view):
        c1, c2 = st.columns(2)
        hist = px.histogram(
            view, x="id", color="category", nbins=60, title="By id (≈ merge order)", labels={"id": "token id"}
        )
        hist.update_layout(height=340, margin={"t": 50, "b": 10}, bargap=0.05)
        c1.plotly_chart(hist, width="stretch", key="th-hist")
        by_script = view.groupby(["script", "category"]).size().reset_index(name="tokens")
        bar = px.bar(by_script, x="script", y="tokens", color="category", title="By script")
        bar.update_layout(height=340, margin={"t": 50, "b": 10}, xaxis={"categoryorder": "total descending"})
        c2.plotly_chart(bar, width="stretch", key="th-script")
        unr = view[view["category"].isin(UNREACHABLE)]
        if len(unr):
            ids = tuple(int(i) for i in unr["id"].head(3000))
            ranks = _would_be_ranks(tok.content_hash, tok, ids)
            pts = pd.DataFrame(
                {
                    "id": list(ids),
                    "would-be merge rank": [ranks[i] for i in ids],
                    "token": [tok.readable(tok.id_to_token[i]) for i in ids],
                }
            ).dropna()
            if len(pts):
                sc = px.scatter(
                    pts,
                    x="id",
                    y="would-be merge rank",
                    hover_name="token",
                    title="Unreachable tokens: id vs the rank of the merge that would make them",
                )
                sc.update_layout(height=320, margin={"t": 50, "b": 10})
                st.plotly_chart(sc, width="stretch", key="th-rank")

    # ------------------------------------------------------------------------------------------ explain
    unreachable_ids = [int(i) for i in view.loc[view["category"].isin(UNREACHABLE), "id"].head(1000)]
    if unreachable_ids:
        st.subheader("Why is a token unreachable?")
        pick = st.selectbox(
            "Unreachable token",
            unreachable_ids,
            key="th-explain",
            format_func=lambda i: f"{i} · {tok.readable(tok.id_to_token[i])!r}",
        )
        e = explain_unreachable(tok, pick)
        st.write(f"BPE builds **{' | '.join(tok.readable(p) for p in e['actual_tokens'])}** instead.")
        st.error(e["reason"])
        if st.button("Open its merge tree", key="th-open-tree"):
            state.open_merge_tree(name, int(pick))

    # ------------------------------------------------------------------------------------------ in practice
    with st.expander("Never produced in practice (tokenize a corpus)"):
        st.caption(
            "Vocabulary tokens that do not occur when the tokenizer (with its own flags) encodes the chosen text."
        )
        lines: list[str] = []
        data_key = ""
        try:
            data = fl.open_flores(None)
            langs = st.multiselect("FLORES languages", data.codes, default=[], key="th-langs")
            for code in langs:
                lines.extend(data.lines(code))
            data_key = ",".join(data.data_hash(c) for c in langs)
        except AnalysisError as e:
            st.caption(f"FLORES not available: {e}")
        up = st.file_uploader("…or a text file (one sentence per line)", type=["txt"], key="th-upload")
        if up is not None:
            text = up.getvalue().decode("utf-8", errors="replace")
            lines.extend(x for x in text.splitlines() if x.strip())
            data_key += f"|upload:{up.name}:{len(text)}:{hash(text)}"
        if lines:
            never = _never(tok.content_hash, data_key, tok, lines)
            st.metric(
                f"Never produced on {len(lines):,} lines",
                f"{len(never):,}",
                help=f"of {len(tok.vocab):,} model-vocabulary tokens",
            )
            nv = df[df["id"].isin(set(never))][["id", "readable", "category", "script"]]
            st.dataframe(nv.head(2000), hide_index=True, width="stretch", key="th-never")
            st.download_button(
                "Download never-produced (CSV)",
                nv.to_csv(index=False),
                f"{name}-never-produced.csv",
                "text/csv",
                key="th-dl-never",
            )

    # ------------------------------------------------------------------------------------------ downloads
    d1, d2, d3 = st.columns(3)
    d1.download_button(
        "Download all ids (CSV)", rep.to_csv(tok.id_to_token), f"{name}-stt.csv", "text/csv", key="th-dl-csv"
    )
    d2.download_button(
        "Download filtered rows (CSV)",
        view.drop(columns=["merge tree"]).to_csv(index=False),
        f"{name}-stt-filtered.csv",
        "text/csv",
        key="th-dl-view",
    )
    d3.download_button(
        "Download summary (JSON)",
        json.dumps(summary, ensure_ascii=False, indent=2),
        f"{name}-stt.json",
        "application/json",
        key="th-dl-json",
    )


page()
