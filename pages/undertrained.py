"""Under-trained tokens: magikarp indicators from a model's own embeddings, verification prompts, token health."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis import LoadedTokenizer
from analysis.core import paths
from analysis.core.outputs import json_document, json_lines
from analysis.core.references import cite, reference
from analysis.jobs.queue import Job
from analysis.methods import undertrained as ut
from analysis.model.source import resolve_model, tokenizer_for_model
from analysis.views.app_jobs import verifications_from_job
from ui.caching import cache_resource
from ui.errors import try_step
from ui.job_inputs import stored_tokenizers
from ui.jobs import job_panel, submit
from ui.library import library
from ui.pickers import model_picker_keys, pick_model
from ui.workspace import current, json_download, keep

#: The page inputs kept in the workspace.
KEPT = ("ut-tok", *model_picker_keys("ut-model"))
#: The page's verification job, kept in the workspace under this key.
JOB_KEY = "ut-verify"

OWN = "the model's own tokenizer"
VERDICT_COLOURS = {"strong_verified": "#D55E00", "weak_verified": "#E69F00", "weak_rejected": "#56B4E9",
                   "strong_rejected": "#0072B2", "verification_encoding_failed": "#999999"}  # fmt: skip
DEVICES = ["auto", "cpu", "cuda"]
IND_DEVICE_HELP = (
    "Where the indicators (norms, cosines, distances over the whole matrix) are computed: cpu; cuda; or auto = "
    "CUDA when present and the matrix is large enough for the GPU to win."
)
MAX_MEMORY_HELP = (
    "Per-device caps for accelerate, e.g. `0=20GiB,1=20GiB,cpu=64GiB` (GPU indices, cpu or disk; sizes with a "
    "unit). Layers that fit nowhere go to a temporary folder on disk. Implies spreading the model."
)
REFS_HELP = (
    "ids, ranges or token strings, e.g. `1-10, [unused20]`. Automatic: bytes that never occur in UTF-8, "
    "<unused…>/reserved specials, rows beyond the tokenizer, identical (never updated) rows, then STT/round-trip "
    "unreachable tokens."
)


@cache_resource(show_spinner="Reading embeddings and computing indicators…", max_entries=6)
def _analysis(
    model: str, fingerprint: str, tok: LoadedTokenizer, refs: tuple[int, ...], pc1: bool, pct: float, device: str
):  # fmt: skip
    """Indicators + candidates, cached by model files (path/size/mtime), tokenizer content and options."""
    return ut.analyze(
        model, tok, reference_ids=list(refs) or None, remove_pc1=pc1, percentile=pct, device=device
    )


@st.cache_resource(show_spinner="Reading the tokenizer…", max_entries=4)
def _own_tokenizer(model: str, fingerprint: str) -> LoadedTokenizer:
    return tokenizer_for_model(resolve_model(model))


def cuda_missing(choice: str, what: str) -> bool:
    """True, after saying so, when `choice` asks for CUDA on a machine without it."""
    if choice.startswith("cuda") and not ut.cuda_available():
        st.warning(
            f"CUDA is not available on this machine: {what} can run on the CPU only (choose cpu or auto)."
        )
        return True
    return False


def _download(df: pd.DataFrame, name: str, key: str, what: str) -> None:
    """CSV and JSON-lines downloads of `df`, written when clicked (a 150k-token table is seconds and megabytes: not
    on every rerun). Strict JSON lines: NaN (an unverified token's probability) is written as null, never NaN."""
    c1, c2 = st.columns(2)
    c1.download_button(f"Download {what} (CSV)", lambda: df.to_csv(index=False).encode(), f"{name}.csv", "text/csv",
                       key=f"{key}-csv")  # fmt: skip
    c2.download_button(f"Download {what} (JSONL)", lambda: json_lines(df.to_dict(orient="records")).encode(),
                       f"{name}.jsonl", "application/jsonl", key=f"{key}-jsonl")  # fmt: skip


def inputs() -> tuple | None:
    """Model, tokenizer, reference tokens and options; the settings of the last "Compute" (None before)."""
    model = pick_model("ut-model")
    tok_choice = st.selectbox("Tokenizer", [OWN, *library()], key="ut-tok")
    with st.expander("Reference tokens and options", expanded=False):
        refs_spec = st.text_input("Reference tokens (empty = automatic)", key="ut-refs", help=REFS_HELP)
        o1, o2, o3 = st.columns(3)
        pct = o1.number_input("Candidate percentile", 0.1, 20.0, 2.0, 0.1, key="ut-pct")
        ind_dev = o2.selectbox(
            "Indicators run on", ["cpu", "auto", "cuda"], key="ut-ind-dev", help=IND_DEVICE_HELP
        )
        pc1 = o3.checkbox("Also cosine with the 1st principal component removed", key="ut-pc1")
    no_cuda = cuda_missing(ind_dev, "the indicators")
    if not model:
        st.info("Choose a model: a fetched one, a local folder/file, or a hub id.")
        return None
    if st.button("Compute indicators", type="primary", key="ut-run", disabled=no_cuda):
        st.session_state["ut-active"] = (model, tok_choice, refs_spec, pc1, pct, ind_dev)
    return st.session_state.get("ut-active")


def summary(res: ut.UndertrainedResult) -> None:
    """Model facts, the indicator's statistics and the reference tokens used."""
    m = st.columns(5)
    m[0].metric("Tied embeddings", "yes" if res.tied else "no")
    m[1].metric("LM head", "yes" if res.has_lm_head else "no")
    m[2].metric(
        "Embedding rows", f"{res.n_rows:,}", help=f"{res.n_tokens:,} of them are tokens of the tokenizer"
    )
    m[3].metric("Main indicator", res.main)
    m[4].metric("Candidates", f"{len(res.candidates):,}")
    stats = res.stats()
    st.caption(
        f"{ut.INDICATOR_LABELS.get(res.main, res.main)}: mean {stats['mean']:.4f} ± {stats['std']:.4f}; "
        f"{ut.ordinal(res.percentile)} percentile of round-trip tokens = threshold {res.threshold:.4f}. "
        f"Weights: {res.weights['format']} · {', '.join(Path(f).name for f in res.weights['files'])}. "
        f"Indicators computed on {res.placement.get('indicators_device', 'cpu')}."
    )
    for n in res.notes:
        st.info(n)
    refs = res.references
    with st.expander(f"Reference tokens used ({len(refs.ids)}, {refs.source})", expanded=False):
        st.dataframe(pd.DataFrame({"id": refs.ids, "token": [res.tokens[i] for i in refs.ids],
                                   "why": [refs.reasons.get(i, "") for i in refs.ids]}),
                     hide_index=True, width="stretch")  # fmt: skip
        val = res.reference_validation()
        if val:
            st.caption(
                f"Held-out known-unused tokens ({val['held_out']}): {val['share_lowest_5pct']:.1%} rank in "
                f"the lowest 5% (median percentile {val['median_percentile']:.2f})."
            )


def histograms(res: ut.UndertrainedResult, table: pd.DataFrame) -> None:
    """One histogram per indicator; the candidate threshold on the main one."""
    names = list(res.indicators)
    cols = st.columns(min(3, len(names)))
    for k, name in enumerate(names):
        fig = px.histogram(table, x=name, nbins=120, log_y=True, title=ut.INDICATOR_LABELS.get(name, name))
        if name == res.main:
            fig.add_vline(x=res.threshold, line_dash="dot", line_color="red")
        fig.update_layout(height=320, margin=dict(l=10, r=10, t=40, b=10))
        cols[k % len(cols)].plotly_chart(fig, key=f"ut-hist-{name}")


def scatter(res: ut.UndertrainedResult, table: pd.DataFrame) -> None:
    """Two indicators against each other, coloured by a token property."""
    names = list(res.indicators)
    if len(names) < 2:
        st.info("Only one indicator is available for this model.")
        return
    s1, s2, s3 = st.columns(3)
    x = s1.selectbox("x", names, index=names.index("cosine" if "cosine" in names else names[0]), key="ut-sx")
    y = s2.selectbox(
        "y", names, index=names.index("l2_distance" if "l2_distance" in names else names[1]), key="ut-sy"
    )
    color = s3.selectbox(
        "colour by", ["class", "round_trip", "script", "candidate", "reference"], key="ut-scol"
    )
    fig = px.scatter(table, x=x, y=y, color=table[color].astype(str), hover_data=["id", "token", "class"],
                     render_mode="webgl", opacity=0.6, title="Tokens near (0, 0) resemble the references")  # fmt: skip
    fig.update_traces(marker=dict(size=4))
    fig.update_layout(height=560, legend_title_text=color)
    st.plotly_chart(fig, key="ut-scatter")


def _tokenizer_input(tok: LoadedTokenizer, own: bool) -> str:
    """The tokenizer as a job's input: "" for the model's own (the worker reads it from the model), else a library
    zip stored in the workspace (its name)."""
    return "" if own else stored_tokenizers({"tokenizer": tok}, "under-trained tokens' tokenizer")


def _job_result(res: ut.UndertrainedResult, job: Job | None, analysis: dict[str, Any]) -> None:
    """A finished verification job of this analysis: its verifications, placement and timings into `res`."""
    if job is None or job.state != "done" or not job.result:
        return
    if any(job.params.get(k) != v for k, v in analysis.items()):
        return  # a job of other indicators (another model, tokenizer or options)
    res.verifications.update(verifications_from_job(job.result))
    res.placement.update(job.result.get("placement") or {})
    res.timings.update(job.result.get("timings") or {})


def placement(res: ut.UndertrainedResult) -> None:
    """Where verification put the model: the device, accelerate's device map and the cost per candidate."""
    p = res.placement
    if "input_device" not in p:
        return
    dm = p.get("device_map_summary")
    per = res.timings.get("verify_per_candidate")
    m = st.columns(4)
    m[0].metric("Verified on", p.get("device") or p["input_device"], help=p.get("reason"))
    m[1].metric("Device map", ", ".join(f"{d}: {n}" for d, n in dm.items()) if dm else "one device",
                help="modules per device (accelerate's device_map=auto)" if dm else None)  # fmt: skip
    stored = res.timings.get("verify_stored") or 0
    m[2].metric("Per candidate", "—" if per is None else f"{per * 1e3:.0f} ms",
                help="three prompts per candidate" + (f"; {stored} read back from the disk store" if stored else ""))  # fmt: skip
    load = res.timings.get("load_lm")
    m[3].metric("Model load", "—" if load is None else f"{load:.1f} s",
                help="loading and placing the model, once per model and placement (not part of the per-candidate "
                "cost; a GGUF model is de-quantised first)")  # fmt: skip
    caps = p.get("max_memory")
    st.caption(
        f"Placement: {p.get('reason', '')}; device_map {p.get('device_map') or 'none'}"
        + (f", max memory {', '.join(f'{d}={v}' for d, v in caps.items())}" if caps else "")
        + f"; about {p.get('needed_bytes', 0) / 2**20:,.0f} MiB of parameters; inputs on {p['input_device']}."
    )


def verify_controls(res: ut.UndertrainedResult, analysis: dict[str, Any]) -> None:
    """How many candidates to verify, on which device and placement; submits the verification as a job of a worker
    when asked, and takes a finished job's verifications into `res` (before the page builds its tables, so that
    every view below shows them; after a reload too: the job's id is kept in the workspace)."""
    if not res.has_lm_head:
        st.warning("This model has no LM head: verification is not possible (the indicators still work).")
        return
    refs = st.checkbox(
        "Also verify the reference tokens",
        key="ut-include-refs",
        help="They are skipped by default: they were chosen because they are known to be unused, and as the rows "
        "the indicators measure distances to, they would take the first places of the candidate list.",
    )
    n_cand = max(
        1, len(res.verification_queue(len(res.candidates), include_references=refs)) + len(res.verifications)
    )
    v1, v2, v3 = st.columns(3)
    k = v1.number_input("Candidates to verify", 1, n_cand, min(20, n_cand), key="ut-k",
                        help="the lowest-indicator candidates" + ("" if refs else ", reference tokens left out"))  # fmt: skip
    bs = v2.number_input("Batch size", 1, 64, 8, key="ut-bs")
    dev = v3.selectbox("Device", DEVICES, key="ut-dev", help="auto: CUDA when present, else the CPU")
    p1, p2 = st.columns([1, 2])
    spread = p1.checkbox("Spread the model over devices", key="ut-devmap",
                         help="accelerate's device_map=auto: GPUs, then CPU memory, then disk (default: only when "
                         "the model does not fit one device)")  # fmt: skip
    mem = p2.text_input(
        "Max memory per device", key="ut-maxmem", placeholder="0=20GiB,cpu=64GiB", help=MAX_MEMORY_HELP
    )
    bad = cuda_missing(dev, "verification")
    if mem.strip() and try_step(ut.parse_max_memory, mem) is None:  # the message is shown
        bad = True
    go = st.button("Verify", type="primary", key="ut-verify", disabled=bad or not current(),
                   help="runs as a job of a worker: Cancel stops it after the current batch")  # fmt: skip
    if go:
        params = {**analysis, "k": int(k), "batch_size": int(bs), "device": dev, "spread": bool(spread),
                  "max_memory": mem.strip(), "include_references": bool(refs)}  # fmt: skip
        try_step(submit, JOB_KEY, "verify-undertrained", params, label=f"Verify {int(k)} candidates")
    _job_result(res, job_panel(JOB_KEY, "Verification"), analysis)
    placement(res)


def verification_results(res: ut.UndertrainedResult, table: pd.DataFrame) -> None:
    """The verified candidates: how many the model fails to repeat, and indicator against max probability."""
    done = [i for i in res.candidates if i in res.verifications]
    if not done:
        if res.has_lm_head:
            st.caption("Nothing verified yet: each candidate gets three repeat prompts; a token the model gives "
                       "less than 1% probability in all three is under-trained.")  # fmt: skip
        return
    vt = table.set_index("id").loc[done].reset_index()
    low = int((vt["max_prob"] < 0.01).sum())
    st.caption(f"{len(done)} verified so far; {low} with max probability < 0.01 (under-trained).")
    fig = px.scatter(vt, x=res.main, y="max_prob", color="verdict", log_y=True, hover_data=["id", "token", "class"],
                     title="Verification: indicator vs max probability",
                     color_discrete_map=VERDICT_COLOURS)  # fmt: skip
    fig.add_hline(y=0.01, line_dash="dot", annotation_text="0.01", annotation_position="bottom right")
    fig.update_layout(height=480)
    st.plotly_chart(fig, key="ut-ver-scatter")
    st.dataframe(vt[["id", "token", res.main, "max_prob", "verdict", "class"]], hide_index=True, width="stretch",
                 key="ut-ver-table")  # fmt: skip


def tables(res: ut.UndertrainedResult, table: pd.DataFrame) -> None:
    """Candidates, the token-health table (filterable by class) and candidates per class, with downloads."""
    cand = pd.DataFrame(res.candidate_rows())
    st.markdown(f"**Candidates** (lowest {res.percentile:g}% of round-trip tokens, {len(cand):,})")
    st.dataframe(cand, hide_index=True, width="stretch", height=320)
    if len(cand):
        _download(cand, "undertrained-candidates", "ut-dl-cand", "candidates")
    st.markdown(
        "**Token health** (all tokens: indicators, percentile, round trip, class, script, STT, verdict)"
    )
    cls_filter = st.multiselect("Classes", list(ut.TOKEN_CLASSES), key="ut-cls")
    view = table[table["class"].isin(cls_filter)] if cls_filter else table
    st.dataframe(view.sort_values(res.main).head(5000), hide_index=True, width="stretch", height=360)
    _download(view, "token-health", "ut-dl-health", "token health")
    doc = paths.public_document(res.to_json())  # the model by name, never the server's layout
    json_download("Download the report (JSON)", json_document(doc), "undertrained.json", key="ut-dl-report",
                       help="the document `python -m analysis undertrained --json` prints")  # fmt: skip
    counts = table[table["candidate"]].groupby("class").size().reindex(ut.TOKEN_CLASSES, fill_value=0)
    st.markdown(f"**Candidates by class** (the rules of {reference('sa-bpe').short}, App. A)")
    st.dataframe(counts.rename("tokens").reset_index(), hide_index=True)


def page() -> None:
    """Model and tokenizer → `undertrained.analyze` → indicators, verification, tables."""
    st.title("Under-trained tokens")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption(
        "Tokens a model (almost) never saw in training keep untrained embeddings and can cause glitches "
        f"({cite('magikarp')}; token classes as in {reference('sa-bpe').short}). Indicators come straight from the "
        "embedding "
        "matrices (L2 norm of input rows for untied models; cosine / L2 distance of unembedding rows to the mean of "
        "known-unused reference tokens); the lowest percentile of tokens that round-trip is verified with three "
        "repeat prompts. Lower indicator = more under-trained."
    )
    active = inputs()
    if not active:
        return
    model, tok_choice, refs_spec, pc1, pct, ind_dev = active
    lib = library()
    if tok_choice != OWN and tok_choice not in lib:
        st.info(f"{tok_choice} is no longer in the library: choose a tokenizer and compute again.")
        return
    src = resolve_model(model)
    fp = src.fingerprint()
    tok = _own_tokenizer(model, fp) if tok_choice == OWN else lib[tok_choice]
    refs = tuple(ut.parse_reference_spec(refs_spec, tok)) if refs_spec.strip() else ()
    base = _analysis(model, fp, tok, refs, pc1, float(pct), ind_dev)
    # this session's verifications, placement and timings: the cached result is shared and never modified
    mine = st.session_state.setdefault(
        f"ut-ver-{fp}-{tok.content_hash}-{refs}-{pc1}-{pct}-{ind_dev}",
        {"verifications": {}, "placement": dict(base.placement), "timings": dict(base.timings)},
    )
    res = dataclasses.replace(base, **mine)
    summary(res)
    t_hist, t_scatter, t_ver, t_tables = st.tabs(
        ["Histograms", "Indicator scatter", "Verification", "Tables"]
    )
    with t_ver:  # first: a verification that just finished must show in every view below
        own = tok_choice == OWN
        analysis = {"model": model, "tokenizers": try_step(_tokenizer_input, tok, own) or "", "refs": list(refs),
                    "pc1": bool(pc1), "pct": float(pct), "ind_device": ind_dev}  # fmt: skip
        verify_controls(res, analysis)
    table = ut.health_table(res, ut.stt_status(tok))
    table = table[table["id"] < res.n_tokens]
    with t_hist:
        histograms(res, table)
    with t_scatter:
        scatter(res, table)
    with t_ver:
        verification_results(res, table)
    with t_tables:
        tables(res, table)


page()
