"""Compression: FLORES-200 languages × tokenizers with the metrics of the papers (bytes/token, fertility…)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis.bpe import parity as pa
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.core.references import cite
from analysis.core.references import reference as paper
from analysis.measure import grid, renyi, summaries
from analysis.measure import metrics as mx
from analysis.texts import flores as fl
from analysis.texts.flores import FloresData
from analysis.tokenizer.tokenizer import LoadedTokenizer
from analysis.views.app_jobs import COMPRESSION_JOB_CELLS, compression_params
from ui.errors import try_step
from ui.job_inputs import stored_tokenizers
from ui.jobs import attached, job_panel, submit
from ui.language_charts import MIN_GROUP, dot_plot, ordered_languages
from ui.library import library
from ui.palette import tokenizer_colours, tokenizer_symbols
from ui.pickers import pick_tokenizers, server_path_input
from ui.progress import progress
from ui.spans import token_spans_html
from ui.workspace import current, json_download, keep, unless_kept

#: The page inputs kept in the workspace.
KEPT = (
    "cmp-toks",
    "cmp-mode",
    "cmp-langs",
    "cmp-metric",
    "cmp-power",
    "cmp-ref",
    "cmp-split",
    "cmp-group-by",
    "cmp-par-vocab",
    "cmp-par-variant",
    "cmp-par-scope",
    "cmp-par-langs",
)

TABLE_COLUMNS = ["tokenizer", "lang", "name", "script", "family", *[m for m in mx.METRIC_LABELS if m != "parity_corpus"],
                 "spaceless"]  # fmt: skip
DEFAULT_LANGS = ["eng_Latn", "est_Latn", "deu_Latn", "fra_Latn", "rus_Cyrl", "arb_Arab", "hin_Deva", "zho_Hans",
                 "jpn_Jpan", "kor_Hang"]  # fmt: skip
MARGIN = {"l": 10, "r": 10, "t": 30, "b": 10}
#: The page's job (a table beyond COMPRESSION_JOB_CELLS cells), kept in the workspace under this key.
JOB_KEY = "compression"
HEATMAP_MAX = 30  # up to this many languages a heatmap with values in the cells; beyond, a grouped dot plot
WORST_K = 20


def flores_source() -> tuple[str, str]:
    """The FLORES location and split, with one-click downloads; returns (path, split)."""
    with st.expander("FLORES data", expanded=False):
        if "cmp-flores-next" in st.session_state:  # a finished download (set before the widget exists)
            st.session_state["cmp-flores"] = st.session_state.pop("cmp-flores-next")
        if "cmp-flores" not in st.session_state:
            default_path = fl.default_flores_path()
            st.session_state["cmp-flores"] = str(default_path) if default_path else ""
        path = flores_path_field()
        split = st.selectbox("Split", fl.SPLITS, key="cmp-split")
        c1, c2 = st.columns(2)
        got = None
        if c1.button("Download official FLORES-200 archive", key="cmp-dl-official"):
            with progress("Downloading FLORES-200…", unit="MB") as cb:
                got = fl.download_official(progress=cb)
        if c2.button("Download FLORES+ from the hub", key="cmp-dl-plus"):
            with progress("Downloading FLORES+…", unit="MB") as cb:
                got = fl.download_flores_plus(split=split, progress=cb)
        if got is not None:
            _downloaded().add(str(got))
            st.session_state["cmp-flores-next"] = str(got)
            st.rerun()
        if not fl.parquet_available():
            st.caption("pyarrow is not installed: FLORES+ parquet sources cannot be read.")
    return path, split


def _downloaded() -> set[str]:
    """FLORES copies this session downloaded (offered back in the path field)."""
    return st.session_state.setdefault("cmp-flores-downloaded", set())


def flores_path_field() -> str:
    """The FLORES location: the operator's (or a finished download's), editable only when server paths are allowed
    (then confined to the allowed folders, see `analysis.core.paths.confine`)."""
    help_text = (f"Official FLORES-200 layout (devtest/<code>.devtest), the official .tar.gz, or FLORES+ parquet. "
                 f"Default: ${fl.ENV_VAR}, else the shared assets.")  # fmt: skip
    current = st.session_state["cmp-flores"]
    default = fl.default_flores_path()
    trusted = {*_downloaded(), str(default or "")} - {""}  # the operator's location and the app's own copies
    path = server_path_input(
        "FLORES folder, .tar.gz or parquet", "cmp-flores", trusted=trusted, help=help_text
    )
    if not paths.server_paths_enabled():
        st.caption(f"FLORES in use: `{paths.public_name(current) if current else 'none configured'}`")
        return current
    return str(path) if path is not None else ""


def pick_languages(data: FloresData) -> list[str]:
    """A custom list, all languages, or the languages of chosen scripts or families."""
    meta = {c: fl.language(c) for c in data.codes}
    mode = st.radio(
        "Languages", ["Custom list", "All", "By script", "By family"], horizontal=True, key="cmp-mode"
    )
    if mode == "All":
        return data.codes
    if mode == "Custom list":
        return st.multiselect("Languages", data.codes, default=unless_kept("cmp-langs", [c for c in DEFAULT_LANGS if c in meta]),
                              key="cmp-langs", format_func=lambda c: f"{c} · {meta[c].name}")  # fmt: skip
    field, label, key, preferred = (
        ("script", "Scripts", "cmp-scripts", "Cyrl") if mode == "By script" else ("family", "Families", "cmp-families", "Uralic")
    )  # fmt: skip
    values = sorted({getattr(m, field) for m in meta.values()})
    chosen = st.multiselect(
        label, values, default=[preferred] if preferred in values else values[:1], key=key,
        format_func=lambda s: f"{s} ({sum(getattr(m, field) == s for m in meta.values())})",
    )  # fmt: skip
    return [c for c, m in meta.items() if getattr(m, field) in chosen]


def heatmap(df: pd.DataFrame, names: list[str], metric: str, order: pd.DataFrame) -> None:
    """Few languages: languages × tokenizers with the values in the cells, tokenizer names on top."""
    pv = df.pivot_table(index="lang", columns="tokenizer", values=metric, aggfunc="first", sort=False)
    pv = pv.reindex(index=order["lang"], columns=[n for n in names if n in pv.columns])
    pv.index = order["label"]
    fig = px.imshow(
        pv, aspect="auto", color_continuous_scale="Viridis" if mx.HIGHER_IS_BETTER.get(metric, True) else "Viridis_r",
        labels={"color": mx.METRIC_LABELS[metric], "y": "", "x": ""}, text_auto=".2f",
    )  # fmt: skip
    fig.update_xaxes(side="top")
    fig.update_layout(height=max(260, 26 * len(pv) + 110), margin=MARGIN)
    st.plotly_chart(fig, key="cmp-heatmap")


def by_language(df: pd.DataFrame, names: list[str], metric: str) -> None:
    """Every language, grouped by script or family, worst first within a group."""
    c1, c2 = st.columns([1, 2])
    by = c1.radio("Group by", ["script", "family"], horizontal=True, key="cmp-group-by")
    order = ordered_languages(df, metric, by, higher_is_better=mx.HIGHER_IS_BETTER.get(metric, True))
    worst = "lowest" if mx.HIGHER_IS_BETTER.get(metric, True) else "highest"
    c2.caption(f"Languages grouped by {by} (groups under {MIN_GROUP} languages pooled), the {worst} mean "
               f"{mx.METRIC_LABELS[metric]} first within a group.")  # fmt: skip
    if len(order) <= HEATMAP_MAX:
        heatmap(df, names, metric, order)
    else:
        st.plotly_chart(dot_plot(df, names, metric, order, mx.METRIC_LABELS[metric]), key="cmp-dots")


def distribution(df: pd.DataFrame, names: list[str], metric: str, key: str) -> None:
    """The distribution of one metric across languages, a box and the languages as points per tokenizer."""
    fig = px.box(df, x=metric, y="tokenizer", color="tokenizer", points="all", hover_name="name",
                 hover_data={"lang": True, "tokenizer": False}, category_orders={"tokenizer": names},
                 color_discrete_map=tokenizer_colours(names), labels={metric: mx.METRIC_LABELS[metric], "tokenizer": ""},
                 title=f"{mx.METRIC_LABELS[metric]} across {df['lang'].nunique()} languages")  # fmt: skip
    fig.update_layout(
        showlegend=False, height=110 + 70 * len(names), margin={"l": 10, "r": 10, "t": 40, "b": 10}
    )
    st.plotly_chart(fig, key=key)


def overview(df: pd.DataFrame, rows: list[dict], names: list[str], metric: str, reference: str) -> None:
    """At a glance: per-tokenizer summary, the distribution of the metric and of parity, the worst languages."""
    summary = pd.DataFrame(summaries.summarize(rows, metric, reference)).drop(columns=["metric"])
    st.dataframe(summary, hide_index=True, width="stretch", key="cmp-summary",
                 column_config={c: st.column_config.NumberColumn(format="%.3f") for c in ("mean", "median", "min",
                                                                                           "max", "gini")})  # fmt: skip
    d1, d2 = st.columns(2)
    with d1:
        distribution(df, names, metric, "cmp-dist")
    with d2:
        if metric != "parity":
            distribution(df, names, "parity", "cmp-dist-parity")
        st.caption(f"Parity: a sentence's tokens divided by the tokens of its {reference} translation, averaged "
                   "over the parallel sentences (1 = as cheap as the reference, 2 = twice the tokens).")  # fmt: skip
    worst = summaries.worst_languages(rows, metric, WORST_K)
    table = pd.DataFrame({n: [f"{w['name']} · {w['value']:.3f}" for w in worst.get(n, [])] for n in names})
    table.index = range(1, len(table) + 1)
    high = "lowest" if mx.HIGHER_IS_BETTER.get(metric, True) else "highest"
    st.markdown(f"**The {WORST_K} worst languages per tokenizer** ({high} {mx.METRIC_LABELS[metric]})")
    st.dataframe(table, width="stretch", height=35 * (len(table) + 1) + 3, key="cmp-worst")


def scatter(df: pd.DataFrame, names: list[str]) -> None:
    """Two metrics against each other, one colour per tokenizer."""
    c1, c2 = st.columns(2)
    xm = c1.selectbox("x", list(mx.METRIC_LABELS), index=0, format_func=mx.METRIC_LABELS.get, key="cmp-sx")
    ym = c2.selectbox("y", list(mx.METRIC_LABELS), index=7, format_func=mx.METRIC_LABELS.get, key="cmp-sy")
    fig = px.scatter(df, x=xm, y=ym, color="tokenizer", symbol="tokenizer", hover_name="name",
                     hover_data=["lang", "script"], category_orders={"tokenizer": names},
                     color_discrete_map=tokenizer_colours(names), symbol_map=tokenizer_symbols(names),
                     labels={xm: mx.METRIC_LABELS[xm], ym: mx.METRIC_LABELS[ym]})  # fmt: skip
    fig.update_layout(height=480, margin=MARGIN)
    st.plotly_chart(fig, key="cmp-scatter")


def per_script(rows: list[dict], metric: str) -> None:
    """Means per script (optionally grouped as in Purason et al. 2026, Table 2) and across languages."""
    table2 = st.toggle(
        f"Group as in {paper('continued-bpe').short}, Table 2 (Latn, Cyrl, Arab, Jpan, Hani, Other)",
        value=True,
        key="cmp-t2",
    )
    ss = pd.DataFrame(summaries.script_summary(rows, metric, table2=table2))
    if not ss.empty:
        wide = ss.pivot_table(index="script", columns="tokenizer", values="mean", sort=False)
        wide.insert(0, "n", ss.groupby("script", sort=False)["n"].max())
        st.dataframe(wide, key="cmp-script-table")


def compare_two(rows: list[dict], names: list[str], metric: str) -> None:
    """Δrel and win rate of A against B (as in Purason et al. 2026, Table 1), per script and per language."""
    if len(names) < 2:
        st.info("Pick two or more tokenizers to compare them.")
        return
    c1, c2 = st.columns(2)
    a = c1.selectbox("A (e.g. ours)", names, index=1, key="cmp-a")
    b = c2.selectbox("B (baseline)", names, index=0, key="cmp-b")
    cmpr = summaries.compare(rows, a, b, metric)
    if not cmpr["languages"]:
        return
    m1, m2, m3 = st.columns(3)
    m1.metric("Δrel (mean A/B − 1)", f"{cmpr['delta_rel']:+.2%}")
    m2.metric("Win rate of A", f"{cmpr['win_rate']:.1%}")
    m3.metric("Languages", cmpr["languages"])
    st.caption(
        f"As in {paper('continued-bpe').short}, Table 1. A win is a higher value for higher-is-better metrics "
        "and a lower one otherwise."
    )
    labels = {"script": "Script group", "n": "Languages", "lang": "Language", "a": f"A: {a}", "b": f"B: {b}",
              "delta_rel": "Δrel (A/B − 1)", "win": "A wins"}  # fmt: skip
    pct = {"Δrel (A/B − 1)": st.column_config.NumberColumn(format="percent")}
    st.dataframe(pd.DataFrame(summaries.script_compare(rows, a, b, metric)).rename(columns=labels), hide_index=True,
                 column_config=pct, key="cmp-sc")  # fmt: skip
    st.dataframe(pd.DataFrame(cmpr["per_language"]).rename(columns=labels), hide_index=True, column_config=pct,
                 key="cmp-per-lang")  # fmt: skip


def drill_down(data: FloresData, names: list[str], langs: list[str], reference: str) -> None:
    """The worst-compressed sentences of one language, tokenized, with the reference translation."""
    c1, c2, c3 = st.columns([2, 2, 1])
    lang = c1.selectbox(
        "Language", langs, format_func=lambda c: f"{c} · {fl.language(c).name}", key="cmp-dl-lang"
    )
    name = c2.selectbox("Tokenizer", names, key="cmp-dl-tok")
    k = c3.number_input("Sentences", 1, 50, 5, key="cmp-dl-k")
    tok = library()[name]
    # the other tabs stay usable
    worst = try_step(summaries.worst_sentences, tok, data.lines(lang), int(k)) or []
    ref_lines = data.lines(reference) if reference in data else None
    for w in worst:
        st.markdown(f"**#{w['index'] + 1}** · {w['tokens']} tokens · {w['bytes']} bytes · "
                    f"**{w['bytes_per_token']:.2f}** bytes/token")  # fmt: skip
        st.html(token_spans_html(tok, w["text"], w["ids"], w["offsets"]))
        if ref_lines and w["index"] < len(ref_lines) and lang != reference:
            st.caption(f"{reference}: {ref_lines[w['index']]}")


def latex_tables(
    df: pd.DataFrame, rows: list[dict], names: list[str], metric: str, split: str
) -> tuple[str, str]:
    """Two LaTeX tables that fit a page: every language (longtable, breaks across pages) and the per-script means."""
    pv = df.pivot_table(index="lang", columns="tokenizer", values=metric, aggfunc="first", sort=False)
    pv = pv[[n for n in names if n in pv.columns]]
    wide = [{"code": lang, "language": fl.language(lang).name, "script": fl.language(lang).script}
            | {n: (None if pd.isna(v) else float(v)) for n, v in r.items()}
            for lang, r in pv.to_dict(orient="index").items()]  # fmt: skip
    what = f"{mx.METRIC_LABELS[metric]} on FLORES-200 {split}"
    long = summaries.to_latex(wide, ["code", "language", "script", *pv.columns], caption=what, longtable=True,
                              label="tab:flores-languages")  # fmt: skip
    ss = pd.DataFrame(summaries.script_summary(rows, metric, table2=True))
    per_script = [{"script": g, "n": int(part["n"].max())} | dict(zip(part["tokenizer"], part["mean"]))
                  for g, part in ss.groupby("script", sort=False)]  # fmt: skip
    summary = summaries.to_latex(per_script, ["script", "n", *names], caption=f"Mean {what}, per script group",
                                 label="tab:flores-scripts")  # fmt: skip
    return long, summary


def downloads(df: pd.DataFrame, rows: list[dict], names: list[str], metric: str, split: str) -> None:
    """CSV and JSON of every cell; LaTeX of the chosen metric for all languages and per script."""
    long, summary = latex_tables(df, rows, names, metric, split)
    c1, c2 = st.columns(2)
    c1.download_button(
        "Download CSV",
        df.to_csv(index=False).encode("utf-8"),
        "compression.csv",
        "text/csv",
        key="cmp-csv",
        on_click="ignore",
    )
    json_download("Download JSON", json_document(rows), "compression.json", container=c2, key="cmp-json",
                  on_click="ignore")  # fmt: skip
    c1, c2 = st.columns(2)
    c1.download_button("Download LaTeX, every language (longtable)", long.encode("utf-8"), "compression-languages.tex",
                       "text/x-tex", key="cmp-tex", on_click="ignore")  # fmt: skip
    c2.download_button("Download LaTeX, per script", summary.encode("utf-8"), "compression-scripts.tex",
                       "text/x-tex", key="cmp-tex-scripts", on_click="ignore")  # fmt: skip
    st.code(summary, language="latex")
    with st.expander(f"LaTeX of every language ({df['lang'].nunique()} rows, breaks across pages)"):
        st.code(long, language="latex")


def results(data: FloresData, names: list[str], langs: list[str], rows: list[dict], reference: str) -> None:
    """Metric choice, then overview, every language, scatter, per script, compare, table, drill down, downloads."""
    df = pd.DataFrame(rows)
    metric = st.selectbox(
        "Metric", list(mx.METRIC_LABELS), format_func=lambda m: mx.METRIC_LABELS[m], key="cmp-metric"
    )
    if metric == "fertility" and df["spaceless"].any():
        spaceless = sorted(df.loc[df["spaceless"], "lang"].unique())
        st.warning(
            f"{len(spaceless)} language(s) are written without spaces ({', '.join(spaceless[:12])}"
            f"{'…' if len(spaceless) > 12 else ''}): tokens per whitespace word is meaningless there. "
            "Use tokens / char instead."
        )
    tabs = st.tabs(["Overview", "Every language", "Scatter", "Per script", "Compare", "Table", "Drill down",
                    "Download"])  # fmt: skip
    with tabs[0]:
        overview(df, rows, names, metric, reference)
    with tabs[1]:
        by_language(df, names, metric)
    with tabs[2]:
        scatter(df, names)
    with tabs[3]:
        per_script(rows, metric)
    with tabs[4]:
        compare_two(rows, names, metric)
    with tabs[5]:
        st.dataframe(df[TABLE_COLUMNS], hide_index=True, key="cmp-table")
    with tabs[6]:
        drill_down(data, names, langs, reference)
    with tabs[7]:
        downloads(df, rows, names, metric, data.split)


def parity_section() -> None:
    """Parity-aware BPE vs plain BPE at equal vocabulary size on FLORES (`parity.parity_comparison`)."""
    with st.expander(
        "Parity-aware BPE vs plain BPE: train both on FLORES and compare premiums", expanded=False
    ):
        st.caption(
            f"Parity-aware BPE ({cite('parity-aware-bpe')}) gives each merge to the language that is compressed worst "
            "on a parallel development set. Both tokenizers get the same vocabulary size and FLORES lines 1–700 of "
            "every language; parity-aware training balances on lines 701–800; both are measured on the held-out "
            f"lines {fl.FLORES_TRAIN_LINES + 1}–1012: premium against English per language, its spread (Gini), and "
            "the compression cost (bytes/token over all languages). Results are cached."
        )
        c1, c2, c3 = st.columns(3)
        vocab = int(
            c1.number_input(
                "Vocabulary size",
                500,
                64_000,
                unless_kept("cmp-par-vocab", 8_000, "min"),
                step=1_000,
                key="cmp-par-vocab",
            )
        )
        variant = c2.selectbox("Variant", pa.VARIANTS, key="cmp-par-variant")
        scope = c3.radio("Languages", ["all", "chosen"], horizontal=True, key="cmp-par-scope",
                         format_func=lambda x: {"all": "all FLORES", "chosen": "chosen"}[x])  # fmt: skip
        langs: str | list[str] = "all"
        if scope == "chosen":
            langs = st.multiselect(
                "Languages",
                fl.available_codes(),
                default=unless_kept("cmp-par-langs", DEFAULT_LANGS),
                key="cmp-par-langs",
            )
        key = (vocab, variant, str(langs))
        if st.button("Train both", key="cmp-par-run", help="all 204 languages take minutes the first time"):
            with progress("Training plain and parity-aware BPE") as cb:
                st.session_state["cmp-par"] = (
                    key,
                    pa.parity_comparison(vocab, langs, variant=variant, progress=cb).to_json(),
                )
        stored = st.session_state.get("cmp-par")
        if stored is None or stored[0] != key:
            return
        parity_results(stored[1])


def parity_results(res: dict) -> None:
    """Headline numbers, per-language premiums of both tokenizers, the table and the JSON."""
    plain, par, cost = res["plain"]["summary"], res["parity"]["summary"], res["cost"]
    m = st.columns(4)
    m[0].metric("Mean premium vs English", f"{par['premium_mean']:.3f}", f"{cost['premium_mean']:+.3f} vs plain",
                delta_color="inverse")  # fmt: skip
    m[1].metric(
        "Gini of premiums",
        f"{par['premium_gini']:.4f}",
        f"{cost['premium_gini']:+.4f}",
        delta_color="inverse",
    )
    m[2].metric(
        "Worst premium", f"{par['premium_max']:.3f}", f"{cost['premium_max']:+.3f}", delta_color="inverse"
    )
    m[3].metric(
        "Bytes/token (cost)", f"{par['bytes_per_token']:.3f}", f"{cost['bytes_per_token_relative']:+.1%}"
    )
    st.caption(
        f"Plain BPE: mean premium {plain['premium_mean']:.3f}, Gini {plain['premium_gini']:.4f}, worst "
        f"{plain['premium_max']:.3f} ({plain['premium_max_lang']}), {plain['bytes_per_token']:.3f} bytes/token. "
        f"Training took {res['plain']['seconds']:.0f} s (plain) and {res['parity']['seconds']:.0f} s (parity-aware)."
    )
    rows = pd.DataFrame(res["plain"]["rows"]).merge(pd.DataFrame(res["parity"]["rows"]), on="lang",
                                                    suffixes=(" plain", " parity"))  # fmt: skip
    rows["script"] = [fl.language(c).script for c in rows["lang"]]
    fig = px.scatter(rows, x="premium plain", y="premium parity", hover_name="lang", color="script",
                     title="Premium vs English per language (below the diagonal: parity-aware is fairer)")  # fmt: skip
    top = float(max(rows["premium plain"].max(), rows["premium parity"].max()))
    fig.add_shape(type="line", x0=0.5, y0=0.5, x1=top, y1=top, line={"dash": "dot", "color": "grey"})
    fig.update_layout(height=420, margin=MARGIN, showlegend=False)
    st.plotly_chart(fig, width="stretch", key="cmp-par-scatter")
    cols = [
        "lang",
        "script",
        "premium plain",
        "premium parity",
        "bytes_per_token plain",
        "bytes_per_token parity",
    ]
    st.dataframe(rows[cols], hide_index=True, key="cmp-par-table")
    json_download(
        "Download the comparison (JSON)", json_document(res), "parity_vs_plain.json", key="cmp-par-dl"
    )


def job_rows(
    toks: dict[str, LoadedTokenizer], flores: str, data: FloresData, langs: list[str], power: float,
    reference: str, run: bool,
) -> list[dict] | None:  # fmt: skip
    """The table as a job of a worker: submitted when asked or when the inputs changed (the same inputs find the
    job already there), its panel while it runs; the rows once it is done (None before)."""
    name = try_step(stored_tokenizers, toks, "compression tokenizers")
    if name is None:
        return None
    params = compression_params(name, list(toks), flores, data.split, langs, power, reference)
    job = attached(JOB_KEY)
    if run or job is None or job.params != params:
        label = f"Compression: {len(toks)} tokenizer(s) × {len(langs)} language(s)"
        if try_step(submit, JOB_KEY, "compression", params, label=label) is None:
            return None
    st.caption(f"{len(toks)} tokenizer(s) × {len(langs)} language(s) is more than {COMPRESSION_JOB_CELLS} cells: "
               "the table is computed by a job worker, not in this page; it comes back here, also after a reload.")  # fmt: skip
    job = job_panel(JOB_KEY, "Compression")
    if job is None or job.state != "done" or not job.result:
        return None
    return job.result["rows"]


def page() -> None:
    """Tokenizers, FLORES languages and options → `grid.compression_table` → charts and downloads."""
    st.title("Compression across FLORES-200 languages")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption(
        "Corpus-level metrics on the parallel FLORES-200 sentences (sums over sentences, no special tokens): "
        f"bytes/token as in {paper('continued-bpe').short} (§4.2), fertility and continued words as in "
        f"{paper('continued-words').short}, parity (premium vs English) as in {paper('parity').short}, "
        f"Rényi efficiency (α = 2.5) on token ids as in {paper('renyi').short}. Results are cached by "
        "tokenizer content hash and data hash."
    )
    parity_section()
    lib = library()
    names = pick_tokenizers("Tokenizers (1–8)", key="cmp-toks", max_n=8)
    st.caption("Add more tokenizers from the sidebar (examples) or the Load & inspect page.")
    path, split = flores_source()
    data = fl.open_flores(path or None, split=split)
    langs = pick_languages(data)
    c1, c2, c3 = st.columns(3)
    power = c1.number_input("Rényi power α", min_value=0.1, max_value=10.0, value=unless_kept("cmp-power", renyi.DEFAULT_POWER, "min"),
                            step=0.5, key="cmp-power")  # fmt: skip
    codes = data.codes
    reference = c2.selectbox("Parity reference", codes, index=unless_kept("cmp-ref", codes.index("eng_Latn") if "eng_Latn" in codes else 0, 0),
                             key="cmp-ref", format_func=lambda c: f"{c} · {fl.language(c).name}")  # fmt: skip
    run = c3.button("Compute", type="primary", key="cmp-run")
    if not names:
        st.info("Pick at least one tokenizer (up to 8).")
        return
    if not langs:
        st.warning("No languages selected: choose at least one language.")
        return
    if run or (current() and attached(JOB_KEY) is not None):  # a job of this page: shown again after a reload
        st.session_state["cmp-active"] = True
    if not st.session_state.get("cmp-active"):
        st.info(
            f"{len(names)} tokenizer(s) × {len(langs)} language(s). Press **Compute**; afterwards changes "
            "recompute automatically (cached cells are instant)."
        )
        return
    if len(names) * len(langs) > COMPRESSION_JOB_CELLS and current():
        rows = job_rows({n: lib[n] for n in names}, path, data, list(langs), float(power), reference, run)
        if rows is None:
            return
    else:
        with progress("Computing") as cb:
            rows = grid.compression_table([lib[n] for n in names], data, langs, power=float(power),
                                          reference=reference, names=names, progress=cb)  # fmt: skip
    st.success(
        f"{len(names)} tokenizer(s) × {len(langs)} language(s) on {paths.shown_path(data.root)} ({data.split})."
    )
    encoders = {r["tokenizer"]: (r["encoder"], r["encoder_reason"]) for r in rows}
    st.caption(
        "Encoder (the same ids either way; a fast encoder is used only once verified): "
        + "; ".join(f"**{n}** — {enc}: {why}" for n, (enc, why) in encoders.items()),
        help="analysis.measure.fast_encode: gigatoken where its ids were compared with tokenizers' on every FLORES "
        "devtest line, the code corpus and a hostile set and found identical, else tokenizers",
    )
    results(data, names, langs, rows, reference)


page()
