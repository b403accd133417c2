"""Token health: the Self-Tokenization Test per category, why tokens are unreachable, and tokens never used."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import streamlit as st

from analysis import LoadedTokenizer
from analysis.bpe import CATEGORIES, CATEGORY_HELP, explain_unreachable, never_produced, stt_report
from analysis.bpe.integrity import integrity
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.core.references import cite
from analysis.texts import flores as fl
from analysis.texts.corpora import MAX_UPLOAD_CHARS, upload_lines
from analysis.views.vocab_views import UNREACHABLE, filter_stt, stt_table, would_be_ranks
from ui import links
from ui.caching import cache_data
from ui.charts import interactive_toggle, show_svg
from ui.errors import try_step
from ui.expanders import lazy_expander
from ui.palette import OKABE_ITO
from ui.pickers import BPE, pick_tokenizer
from ui.progress import progress, start_now
from ui.spans import pieces_html
from ui.svg import bar_chart, id_bins
from ui.workspace import json_download, keep

#: The page inputs kept in the workspace.
KEPT = ("th-tok",)

LABELS = {
    "reachable": "Reachable",
    "unreachable_multi": "Unreachable (splits)",
    "unreachable_other_single": "Unreachable (other token)",
    "merge_skip_only": "Only via merge skipping",
    "byte_fallback": "Byte-fallback pieces",
    "special": "Special / added",
    "unk": "Unk",
}
SHORT = {"reachable": "Reachable", "unreachable_multi": "Splits", "unreachable_other_single": "Other token",
         "merge_skip_only": "Skip-only", "byte_fallback": "Byte pieces", "special": "Special", "unk": "Unk"}  # fmt: skip
MAX_ROWS = 5000


@cache_data(show_spinner=False, max_entries=8)
def _would_be_ranks(tok: LoadedTokenizer, ids: tuple[int, ...]) -> dict[int, int | None]:
    return would_be_ranks(tok, ids)


@cache_data(show_spinner="Encoding the corpus with the tokenizer…", max_entries=16)
def _never(tok: LoadedTokenizer, lines: tuple[str, ...]) -> list[int]:
    return never_produced(tok, lines)


def counts(name: str, tok: LoadedTokenizer, summary: dict) -> None:
    """The STT count and one metric per category."""
    cells = st.columns(4) + st.columns(4)  # two rows: six-digit counts stay whole on a 1280-pixel screen
    cells[0].metric(
        "Unreachable tokens (STT)", f"{summary['unreachable']:,}", help="unreachable by merges, all kinds"
    )
    for c, cat in zip(cells[1:], CATEGORIES):
        c.metric(SHORT[cat], f"{summary[cat]:,}", help=f"{LABELS[cat]}: {CATEGORY_HELP[cat]}")
    if summary["unreachable"] == 0:
        st.success(f"All {summary['reachable']:,} merge-built tokens of {name} are reachable.")
    if tok.ignore_merges and summary["merge_skip_only"]:
        st.info(
            f"{name} uses ignore_merges (merge skipping): its {summary['merge_skip_only']:,} merge-unreachable tokens "
            "are produced only when a whole pre-token equals them."
        )


def default_categories(summary: dict) -> list[str]:
    """The categories a tokenizer's table opens on: its unreachable kinds, else its first other category."""
    present = [c for c in CATEGORIES if summary[c]]
    return [c for c in UNREACHABLE if summary[c]] or [c for c in present if c != "reachable"][:1] or present


def reset_filters(tok: LoadedTokenizer, summary: dict) -> None:
    """On another tokenizer, put the filters back to its defaults *by value*.

    Assigning the widgets' state (rather than deleting it) is what makes the browser redraw them: a widget keeps
    its identity across tokenizers (same key), so a deleted value would leave the old chips on screen while the
    table already used the new defaults.
    """
    if st.session_state.get("th-last") == tok.content_hash:
        return
    st.session_state["th-last"] = tok.content_hash
    st.session_state["th-cats"] = default_categories(summary)
    st.session_state["th-scripts"] = []
    st.session_state["th-q"] = ""


def token_table(name: str, df: pd.DataFrame, summary: dict) -> pd.DataFrame:
    """Filters (categories, search, scripts) and the table with a merge-tree link per row (where a new session can
    load the tokenizer); returns the view."""
    st.subheader("Tokens")
    present = [c for c in CATEGORIES if summary[c]]
    f1, f2, f3 = st.columns([2, 2, 1])
    cats = f1.multiselect("Categories", present, key="th-cats", format_func=lambda c: LABELS[c])
    q = f2.text_input("Search (readable or raw form)", key="th-q")
    scripts_all = sorted(df.loc[df["category"].isin(cats), "script"].unique()) if cats else []
    if any(s not in scripts_all for s in st.session_state.get("th-scripts", [])):
        st.session_state["th-scripts"] = [s for s in st.session_state["th-scripts"] if s in scripts_all]
    scripts = f3.multiselect("Scripts", scripts_all, key="th-scripts")
    view = filter_stt(df, cats, q, scripts)
    st.caption(f"{len(view):,} of {len(df):,} ids")
    shown = view.head(MAX_ROWS)
    urls = links.merge_tree_links(
        name, shown["token"]
    )  # None for an upload or an edit: no link to a new session
    if urls is not None:
        shown = shown.assign(**{"merge tree": urls})
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
    if len(view) > MAX_ROWS:
        st.caption(f"Showing the first {MAX_ROWS:,} rows; the downloads hold all of them.")
    return view


def replay_now(tok: LoadedTokenizer, view: pd.DataFrame) -> bool:
    """Whether to show the merge ranks and explanations of the unreachable tokens in `view` now (on a button above
    100k tokens: the first explanation replays every merge; False when none is unreachable)."""
    if not view["category"].isin(UNREACHABLE).any():
        return False
    return start_now(tok, "th-replay-go", "Merge ranks and explanations of the unreachable tokens",
                     "the first explanation replays every merge")  # fmt: skip


def charts(tok: LoadedTokenizer, view: pd.DataFrame, replay: bool) -> None:
    """The filtered tokens by id and by script (static SVG first, Plotly on request); unreachable ones against the
    rank of their would-be merge."""
    interactive = interactive_toggle("th-plotly", charts=2)
    c1, c2 = st.columns(2)
    if interactive:
        hist = px.histogram(view, x="id", color="category", nbins=60, title="By id (≈ merge order)",
                            labels={"id": "token id"})  # fmt: skip
        hist.update_layout(height=340, margin={"t": 50, "b": 10}, bargap=0.05)
        c1.plotly_chart(hist, width="stretch", key="th-hist")
        by_script = view.groupby(["script", "category"]).size().reset_index(name="tokens")
        bar = px.bar(by_script, x="script", y="tokens", color="category", title="By script")
        bar.update_layout(height=340, margin={"t": 50, "b": 10}, xaxis={"categoryorder": "total descending"})
        c2.plotly_chart(bar, width="stretch", key="th-script")
    else:
        present = [c for c in CATEGORIES if (view["category"] == c).any()]
        colours = {SHORT[c]: OKABE_ITO[k % len(OKABE_ITO)] for k, c in enumerate(CATEGORIES)}
        ids = view["id"].to_numpy()
        labels, edges = id_bins(ids)
        hist_series = [(SHORT[c], np.histogram(ids[(view["category"] == c).to_numpy()], edges)[0].tolist())
                       for c in present]  # fmt: skip
        show_svg(bar_chart(labels, hist_series, colours, title="Tokens by id",
                           y_label="tokens", label_every=max(1, len(labels) // 6), legend=True, width=560),
                 heading="By id (≈ merge order)", container=c1)  # fmt: skip
        table = view.groupby(["script", "category"]).size().unstack(fill_value=0)
        table = table.loc[table.sum(axis=1).sort_values(ascending=False).index]
        script_series = [(SHORT[c], table[c].tolist()) for c in present if c in table]
        show_svg(bar_chart([str(s) for s in table.index], script_series, colours, title="Tokens by script",
                           y_label="tokens", legend=True, width=560), heading="By script", container=c2)  # fmt: skip
    ids = (
        tuple(int(i) for i in view.loc[view["category"].isin(UNREACHABLE), "id"].head(3000)) if replay else ()
    )
    ranks = _would_be_ranks(tok, ids) if ids else {}
    pts = pd.DataFrame({"id": list(ids), "would-be merge rank": [ranks[i] for i in ids],
                        "token": [tok.readable(tok.id_to_token[i]) for i in ids]}).dropna()  # fmt: skip
    if len(pts):
        sc = px.scatter(pts, x="id", y="would-be merge rank", hover_name="token",
                        title="Unreachable tokens: id vs the rank of the merge that would make them")  # fmt: skip
        sc.update_layout(height=320, margin={"t": 50, "b": 10})
        st.plotly_chart(sc, width="stretch", key="th-rank")


def explain(name: str, tok: LoadedTokenizer, view: pd.DataFrame, replay: bool) -> None:
    """Why one unreachable token is unreachable, with a link to its merge tree."""
    ids = [int(i) for i in view.loc[view["category"].isin(UNREACHABLE), "id"].head(1000)]
    if not ids:
        return
    st.subheader("Why is a token unreachable?")
    if st.session_state.get("th-explain") not in ids:  # by value, so the browser shows what is explained
        st.session_state["th-explain"] = ids[0]
    pick = st.selectbox("Unreachable token", ids, key="th-explain",
                        format_func=lambda i: f"{i} · {tok.readable(tok.id_to_token[i])!r}")  # fmt: skip
    if not replay:
        return
    e = explain_unreachable(tok, pick)
    st.markdown("From the token's own string, BPE builds these tokens instead:")
    st.html(pieces_html([tok.readable(p) for p in e["actual_tokens"]]))
    st.info(e["reason"][0].upper() + e["reason"][1:] + ".", icon=":material/lightbulb:")
    if tok.ignore_merges:
        st.caption(
            f"{name} uses ignore_merges: the token is still produced when a whole pre-token equals it."
        )
    if st.button("Open its merge tree", key="th-open-tree"):
        links.open_merge_tree(name, int(pick))


def corpus_lines() -> list[str]:
    """Lines of FLORES languages and/or an uploaded text file (FLORES missing is a note, not an error)."""
    lines: list[str] = []
    data = try_step(fl.open_flores, None)
    if data is not None:
        for code in st.multiselect("FLORES languages", data.codes, default=[], key="th-langs"):
            lines.extend(data.lines(code))
    up = st.file_uploader(
        "…or a text file (one sentence per line)",
        type=["txt"],
        key="th-upload",
        max_upload_size=paths.upload_widget_mb(),
    )
    if up is not None:
        units, cut = upload_lines(up.name, up.getvalue())  # strict UTF-8: no replacement characters
        lines.extend(units)
        if cut:
            st.caption(f"{up.name}: only the first {MAX_UPLOAD_CHARS:,} characters are tokenized.")
    return lines


def never_used(name: str, tok: LoadedTokenizer, df: pd.DataFrame) -> None:
    """Vocabulary tokens that a corpus never produces, with the tokenizer's own pipeline and flags."""
    box = lazy_expander("Never produced in practice (tokenize a corpus)", "th-never-box", keep=["th-langs"])
    if box is None:  # closed: no corpus fields (a file uploader) in the first view
        return
    with box:
        st.caption(
            "Vocabulary tokens that do not occur when the tokenizer (with its own flags) encodes the chosen text."
        )
        lines = corpus_lines()
        if not lines:
            return
        never = _never(tok, tuple(lines))
        st.metric(f"Never produced on {len(lines):,} lines", f"{len(never):,}",
                  help=f"of {len(tok.vocab):,} model-vocabulary tokens")  # fmt: skip
        nv = df[df["id"].isin(set(never))][["id", "readable", "category", "script"]]
        st.dataframe(nv.head(2000), hide_index=True, width="stretch", key="th-never")
        st.download_button("Download never-produced (CSV)", lambda: nv.to_csv(index=False), f"{name}-never-produced.csv",
                           "text/csv", key="th-dl-never")  # fmt: skip


def downloads(name: str, tok: LoadedTokenizer, view: pd.DataFrame, summary: dict) -> None:
    """All ids, the filtered rows and the summary."""
    d1, d2, d3 = st.columns(3)
    d1.download_button("Download all ids (CSV)", lambda: stt_report(tok).to_csv(tok.id_to_token), f"{name}-stt.csv",
                       "text/csv", key="th-dl-csv")  # built on click: 150k rows take a second  # fmt: skip
    d2.download_button("Download filtered rows (CSV)", lambda: view.to_csv(index=False), f"{name}-stt-filtered.csv",
                       "text/csv", key="th-dl-view")  # fmt: skip
    json_download(
        "Download summary (JSON)", json_document(summary), f"{name}-stt.json", container=d3, key="th-dl-json"
    )


def integrity_section(name: str, tok: LoadedTokenizer) -> None:
    """Every id decoded to its bytes and encoded back with the whole pipeline (behind a button): the counts per
    reason, the ids that do not come back alone, and the JSON (`python -m analysis integrity --json`)."""
    st.subheader("Integrity: does every id come back from its own text?")
    st.caption("The check run before deploying a tokenizer: each id's bytes go through the whole pipeline "
               "(normalizer, pre-tokenizer, model); an id passes when the text encodes to that id alone. The others are "
               f"listed with the first reason that explains them. Same as `python -m analysis integrity {name} --json`.")  # fmt: skip
    if st.button("Check every id", key="th-integrity-run"):
        with progress("Encoding every token's text") as cb:
            st.session_state["th-integrity"] = (tok.content_hash, integrity(tok, progress=cb).to_json())
    got = st.session_state.get("th-integrity")
    if got is None or got[0] != tok.content_hash:
        return
    doc = got[1]
    st.metric("Ids that come back alone", f"{doc['round_trip']:,} of {doc['ids']:,}")
    st.dataframe(
        pd.DataFrame([{"reason": k, "ids": v} for k, v in doc["counts"].items() if v]), hide_index=True
    )
    rows = [
        r | {"encoded_as": " ".join(map(str, r["encoded_as"]))} for v in doc["listed"].values() for r in v
    ]
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=300)
    st.download_button("Download the integrity report (JSON)", json_document(doc), f"{name}-integrity.json",
                       "application/json", key="th-integrity-dl")  # fmt: skip


def page() -> None:
    """Tokenizer (BPE) → STT report → counts, table, charts, explanation, corpus check, downloads."""
    st.title("Token health")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption(
        f"The Self-Tokenization Test ({cite('continued-bpe')}, §3.3): every vocabulary string goes through the bare BPE model "
        "(no normalizer or pre-tokenizer, ignore_merges off, no dropout). A token is reachable when the model "
        "gives back exactly that token; otherwise no input can ever produce it through merges."
    )
    tok = pick_tokenizer("Tokenizer", key="th-tok", needs=BPE, feature="The Self-Tokenization Test")
    if tok is None:
        return
    name = st.session_state["th-tok"]
    with progress("Running the Self-Tokenization Test (once per tokenizer)…") as cb:
        summary = stt_report(tok, progress=cb).summary()
        df = stt_table(tok)
    reset_filters(tok, summary)
    counts(name, tok, summary)
    view = token_table(name, df, summary)
    replay = replay_now(tok, view)
    if len(view):
        charts(tok, view, replay)
    explain(name, tok, view, replay)
    never_used(name, tok, df)
    downloads(name, tok, view, summary)
    integrity_section(name, tok)


page()
