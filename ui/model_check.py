"""The "Model check" section of the edit pages (Extend, Prune, Token reuse): the edit made in this browser session,
written with its model, measured against the original model per language (bits per byte on the same bytes, tokens
per byte, mass on new ids, KL on unchanged spans, mass on removed ids), with an optional initialisation bake-off
and a warm-up of the new rows. The JSON download is the document `python -m analysis model-check --json` prints.

* **No server path needed; a job of the workers.** Every edit page hands over a *recipe*
  (:mod:`analysis.views.model_jobs`): a function that stores the edit's inputs in the workspace and returns the
  params that rebuild the edited model there. The check runs in a worker process (:mod:`ui.jobs`), never in the
  server; a reload or a restart re-attaches, Cancel keeps what was finished, and the edited model is kept in the
  workspace as a zip. The original model comes from the page's model picker, or this section's own (fetched demo
  models, the operator's model library, uploads, hub ids; server paths only when the operator allows them, through
  :func:`ui.pickers.pick_model`).
* **The equivalent command** (``python -m analysis model-check …``, languages and lines as measured) is shown under
  the result; the page's default of :data:`PAGE_LINES` lines per language (the CLI: all 212) is explained by the
  lines widget's help.
* :func:`model_export_section` is the Extend and Prune pages' "Export the model into this workspace", a job of
  kind ``model-export`` with the same recipe; :func:`model_folder_export_section` the same job into a new server
  folder (Extend, Token reuse), where the operator allows server paths.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis.adapt.embeddings import INIT_HELP, INITS
from analysis.adapt.warmup import OBJECTIVES
from analysis.commands._equivalent import Equivalent, model_check_command
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.errors import AnalysisError
from analysis.evaluate.model_check import DEFAULT_LANGS, HELDOUT_LINES, PAGE_LINES
from analysis.texts.flores import available_codes
from analysis.tokenizer.export import library_zip
from analysis.tokenizer.tokenizer import LoadedTokenizer
from ui.downloads import artifact_button, job_downloads
from ui.jobs import attached, job_panel, stored_input, stored_json, submit
from ui.pickers import model_picker_keys, pick_model, server_path_input
from ui.workspace import STORE_ERRORS, current, json_download, keep, store, unless_kept

#: Why the page's default lines differ from the CLI's.
LINES_HELP = (
    f"The page measures {PAGE_LINES} held-out lines per language by default so that a check of a few languages "
    f"ends in about a minute on a shared server; `python -m analysis model-check` measures all {HELDOUT_LINES} "
    "(lines 801–1012), which gives steadier numbers (the differences between models can change noticeably). "
    f"Set {HELDOUT_LINES} here to reproduce the CLI's figures; the command under the result has this page's value."
)
#: What a page hands over to run the check as a job: a function that stores the edit's inputs in the workspace
#: and returns the recipe's params (op, tokenizers, report, model, init, label; see analysis.views.model_jobs).
Recipe = Callable[[], dict[str, Any]]


#: The tables' headers: the JSON document's keys (`model-check --json`) in words.
HEADERS = {
    "lang": "Language", "variant": "Variant", "init": "Initialisation",
    "bpb_original": "Bits/byte, original", "bpb_edited": "Bits/byte, edited", "delta_bpb": "Δ bits/byte",
    "tokens_per_byte_original": "Tokens/byte, original", "tokens_per_byte_edited": "Tokens/byte, edited",
    "mass_new_on_old_text": "Mass on new ids (old text)", "kl_unchanged": "KL on unchanged spans (nats)",
    "unchanged_positions": "Unchanged positions", "mass_removed": "Mass on removed ids", "lines": "Lines",
    "bytes": "Bytes", "tokens_original": "Tokens, original", "tokens_edited": "Tokens, edited",
}  # fmt: skip


def human_table(rows: list[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """A table of the document's records with :data:`HEADERS` for column names (unknown keys kept)."""
    return pd.DataFrame(rows).rename(columns=HEADERS)


def zoomed_range(values: list[float]) -> list[float] | None:
    """A y range around the values with a margin (10 % of their spread, at least 1 % of their size): bars from 0
    made a difference of 0.01 bits per byte invisible. None when there is nothing finite to show."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    pad = max((hi - lo) * 0.1, abs(hi) * 0.01, 1e-6)
    return [max(0.0, lo - 3 * pad) if lo >= 0 else lo - 3 * pad, hi + pad]


def _zoomed_bars(fig: Any, values: list[float]) -> Any:
    span = zoomed_range(values)
    if span is not None:
        fig.update_yaxes(range=span)
    return fig


def _charts(doc: dict, key: str) -> None:
    rows = [
        {"language": c["lang"], "model": m, "bits per byte": c[f"bpb_{m}"]}
        for c in doc["languages"]
        for m in ("original", "edited")
    ]
    if not rows:
        return
    fig = px.bar(pd.DataFrame(rows), x="language", y="bits per byte", color="model", barmode="group",
                 title="Bits per byte on the same held-out bytes")  # fmt: skip
    st.plotly_chart(_zoomed_bars(fig, [r["bits per byte"] for r in rows]), key=f"{key}-bpb")
    st.caption("The bits-per-byte axis is zoomed to the values (it does not start at 0), so that small "
               "differences show; the table has the numbers.")  # fmt: skip
    st.dataframe(human_table(doc["languages"]), hide_index=True)
    _flags(doc)
    bake = doc.get("bakeoff")
    if bake:
        for row in bake["languages"]:
            df = pd.DataFrame([{"init": k, **v} for k, v in row["inits"].items()])
            original = df["bpb_original"].iloc[0]
            fig = px.bar(df, x="init", y="bpb_edited", hover_data=["mass_new_on_old_text", "kl_unchanged"],
                         labels=HEADERS, title=f"{row['lang']}: bits per byte by initialisation (original {original:.4f})")  # fmt: skip
            fig.add_hline(y=original, line_dash="dot", annotation_text="original")
            st.plotly_chart(_zoomed_bars(fig, [*df["bpb_edited"], original]), key=f"{key}-bake-{row['lang']}")
            st.dataframe(human_table(df[["init", "bpb_edited", "mass_new_on_old_text", "kl_unchanged"]]),
                         hide_index=True)  # fmt: skip
    wu = doc.get("warmup")
    if wu:
        curve = [
            {"step": p["step"], "language": lang, "bits per byte": v}
            for p in wu["curve"]
            for lang, v in p["bpb"].items()
        ]
        st.plotly_chart(px.line(pd.DataFrame(curve), x="step", y="bits per byte", color="language", markers=True,
                                title=f"Warm-up of the new rows ({wu['objective']})"), key=f"{key}-warm")  # fmt: skip


#: The flagged rows' table headers.
FLAG_HEADERS = {
    "id": "Id", "token": "Token", "argmax_count": "Argmax where another token is next", "occurrences": "Occurrences",
    "max_prob": "Largest p", "misplaced_max_prob": "Largest p where another token is next",
}  # fmt: skip


def flag_table(rows: list[dict[str, Any]], limit: int = 200) -> pd.DataFrame:
    """The flagged rows (``flagged_new_rows`` of the document, loudest first) as a table with words for headers,
    the first `limit` of them."""
    return pd.DataFrame(rows[:limit], columns=list(FLAG_HEADERS)).rename(columns=FLAG_HEADERS)


def _flags(doc: dict) -> None:
    """The new rows (and languages) flagged for unusual probability mass, or "none flagged"."""
    rule = doc.get("flag_rule")
    if rule is None:
        return
    rows, langs = doc.get("flagged_new_rows", []), doc.get("flagged_languages", [])
    st.markdown("**New rows with unusual probability mass**")
    st.caption(f"Rule: a new row is flagged when it is the {rule['rows']}; a row initialised as a mean of "
               "original rows can never win (Jensen's inequality), so a flagged row is loud: large, random or "
               f"mis-copied. A language is flagged when the {rule['languages']} (≥ 1 bit per token lost).")  # fmt: skip
    if rows:
        st.dataframe(flag_table(rows), hide_index=True)
        if len(rows) > 200:
            st.caption(f"The 200 loudest of {len(rows):,} flagged rows; the JSON download lists all.")
    else:
        st.caption("None flagged.")
    for c in langs:
        st.warning(f"{c['lang']}: the new ids take {c['mass_new_on_old_text']:.2f} of the probability reading the "
                   f"old tokenization ({c['kl_nats']:.3f} nats per token).", icon=":material/warning:")  # fmt: skip


def model_check_section(
    key: str,
    label: str,
    recipe: Recipe,
    *,
    original: str | None = None,
    bakeoff: bool = True,
    keep_model: bool = True,
) -> None:
    """The section: the original model (the page's, else a picker here), languages (or all 204), lines, inits
    and warm-up → a button that submits the check as a job of the workers (:mod:`ui.jobs`) → its panel (progress,
    place in the queue, Cancel) → charts, table, JSON download and the edited model's zip.

    `recipe()` stores the edit's inputs in the workspace and returns the params that rebuild the edited model there
    (:mod:`analysis.views.model_jobs`; the job finds how to read an edit that is not one tokenizer, R-BPE or a
    transplant, by its ``op``); `label` names the edit in the document; `bakeoff` False hides the initialisation
    bake-off and the warm-up (edits without appended ids); `keep_model` False does not keep the edited model as a
    zip (a page whose own model export keeps it: a second copy of a model of hundreds of MB fills the workspace's
    quota). The job's id is kept in the workspace, so a reload or a restart re-attaches to it."""
    st.subheader("Model check")
    keep(f"{key}-all", f"{key}-langs", f"{key}-lines", f"{key}-inits", f"{key}-steps", f"{key}-obj",
         *model_picker_keys(f"{key}-model"))  # restored from the workspace after a reload or a restart  # fmt: skip
    kept = ("the edited model is kept in this workspace as a zip" if keep_model else
            "the edited model itself: *Export the model into this workspace* above")  # fmt: skip
    st.caption(
        "The edit is written with the model as a job of the server's workers (a reload or a restart finds it "
        f"again; {kept}) and measured against the original model on the same held-out FLORES bytes "
        "(lines 801–1012)."
    )
    if not original:
        original = pick_model(
            f"{key}-model", "Original model (the one this tokenizer belongs to)", optional=True
        )
    if not original or original == "none":
        st.caption("Choose the model that goes with the tokenizer to measure the edited model.")
        return
    c1, c2, c3 = st.columns([3, 1, 1])
    codes = available_codes()
    every = c3.checkbox(f"All {len(codes)} languages", key=f"{key}-all",
                        help="a background job: the page stays usable; Cancel keeps the finished languages")  # fmt: skip
    default = [c for c in DEFAULT_LANGS if c in codes]
    langs = c1.multiselect("Languages (held-out FLORES lines; the first one is the warm-up's training text)", codes,
                           default=unless_kept(f"{key}-langs", default), key=f"{key}-langs", disabled=every)  # fmt: skip
    langs = codes if every else langs
    lines = c2.number_input("Lines per language", 1, HELDOUT_LINES, unless_kept(f"{key}-lines", PAGE_LINES, "min"),
                            key=f"{key}-lines",
                            help=LINES_HELP)  # fmt: skip
    inits, steps, objective = [], 0, OBJECTIVES[0]
    if bakeoff:
        c4, c5, c6 = st.columns([3, 1, 1])
        inits = c4.multiselect("Bake-off of the new rows", INITS, key=f"{key}-inits",
                               help="; ".join(f"{k}: {v}" for k, v in INIT_HELP.items()))  # fmt: skip
        steps = c5.number_input("Warm-up steps", 0, 2000, key=f"{key}-steps")  # starts at its minimum, 0
        objective = c6.selectbox("Objective", OBJECTIVES, key=f"{key}-obj")
    options = {"langs": list(langs), "lines": int(lines), "inits": list(inits), "steps": int(steps),
               "objective": objective}  # fmt: skip
    _as_job(key, original, label, {**options, "keep_model": keep_model}, recipe)


def _result(
    key: str, doc: dict[str, Any] | None, original: str | None = None, options: dict | None = None
) -> None:
    """The finished check: charts, table, the JSON download and the equivalent command (the check's own original
    model and options, as the document records them, else the section's)."""
    if doc:
        if not doc.get("complete", True):
            st.warning("Cancelled: the languages finished before the cancel are shown.")
        _charts(doc, key)
        json_download(
            "Download model_check.json", json_document(doc), "model_check.json", key=f"{key}-download"
        )
        cmd = check_command(doc, original, options)
        st.caption(cmd.caption())
        st.code(cmd.text(), language="bash", wrap_lines=True)


def check_command(doc: dict[str, Any], original: str | None, options: dict[str, Any] | None) -> Equivalent:
    """``python -m analysis model-check …`` for a finished check: languages and lines as measured (the document's),
    the bake-off's inits and the warm-up as asked (`options`), the original model as the page named it."""
    opts = options or {}
    rows = doc.get("languages") or []
    langs = [r["lang"] for r in rows] or list(opts.get("langs") or [])
    lines = rows[0].get("lines") if rows else opts.get("lines")
    return model_check_command(str(original or doc.get("original") or "ORIGINAL"), langs=langs or None,
                               lines=int(lines) if lines else None, inits=list(opts.get("inits") or []),
                               warmup_steps=int(opts.get("steps") or 0), objective=opts.get("objective"))  # fmt: skip


def _as_job(key: str, original: str, label: str, options: dict[str, Any], recipe: Recipe) -> None:
    """The check as a job: the button submits the recipe (the same inputs find the job already there), the panel
    follows it, and a done job's document and edited model are shown."""
    job = job_panel(key, "Model check")
    busy = job is not None and not job.final
    if options["langs"] and st.button("Check the model", key=f"{key}-run", disabled=busy):
        try:
            params = {**recipe(), "model": original, "label": label, **options}
            submit(key, "model-check", params, label=f"Model check · {label}")
        except (*STORE_ERRORS, AnalysisError) as e:
            st.error(paths.public_text(str(e)), icon=":material/error:")
            return
        st.rerun()
    if job is not None and job.state == "done" and job.result:
        _result(key, job.result, str(job.params.get("model") or original), job.params)
        name = job.result.get("model_artifact")
        if name:
            artifact_button(
                name, "Download the edited model (zip, Hugging Face folder)", key=f"{key}-model-zip"
            )
        elif job.result.get("model_artifact_error"):
            st.warning(paths.public_text(job.result["model_artifact_error"]), icon=":material/warning:")


def model_export_section(key: str, recipe: Recipe, model: str, name: str, gguf: bool) -> None:
    """ "Export the model into this workspace" as a job of the workers (kind ``model-export``): the button submits
    the recipe (`recipe()` stores the edit's inputs and returns the params) with the model, the files' `name` and
    `gguf`; the panel follows the job (a reload or a restart re-attaches) and the done job's artifacts are streamed
    download links while its files are there (:func:`ui.downloads.job_downloads`)."""
    job = job_panel(key, "Model export")
    busy = job is not None and not job.final
    if st.button("Export the model into this workspace", key=f"{key}-build", icon=":material/inventory_2:",
                 disabled=busy, help="A job of the server's workers: the page stays usable, a reload finds it"):  # fmt: skip
        _submit_export(key, recipe, {"model": model, "name": name, "gguf": bool(gguf)}, name)
    if job is not None and job.state == "done" and job.result:
        links = [(str(art), str(what)) for art, what in job.result.get("artifacts") or []]
        if job_downloads(job, links, key=f"{key}-dl", what="this export"):
            st.caption(
                "Kept in this workspace (the sidebar's Files list): the links work in this workspace only."
            )


def _submit_export(key: str, recipe: Recipe, options: dict[str, Any], shown: str) -> None:
    """Submit the ``model-export`` job of `recipe` with `options` under `key` and rerun; a store or edit error is
    shown on the page instead."""
    try:
        submit(key, "model-export", {**recipe(), **options}, label=f"Model export · {shown}")
    except (*STORE_ERRORS, AnalysisError) as e:
        st.error(paths.public_text(str(e)), icon=":material/error:")
        return
    st.rerun()


def model_folder_export_section(
    key: str,
    recipe: Recipe,
    model: str,
    name: str,
    gguf: bool,
    *,
    label: str = "…or a new folder on the server",
) -> None:
    """The same export into a new folder on the server, where the operator allows server paths (the field is
    :func:`ui.pickers.server_path_input`, and the worker confines the path again): a ``model-export`` job with
    ``out``, built in a temporary sibling and moved into place whole; nothing is shown with server paths off."""
    if not paths.server_paths_enabled():
        return
    done = attached(key)
    if done is not None and done.state == "done" and (done.result or {}).get("folder"):
        typed = str(st.session_state.get(f"{key}-out") or "").strip()
        if typed and Path(typed).expanduser().resolve() == Path(done.result["folder"]):
            st.session_state[f"{key}-out"] = ""  # written: a fresh name (the field would say "exists")
    out = server_path_input(label, f"{key}-out", write=True)
    job = job_panel(key, "Model export to the server")
    busy = job is not None and not job.final
    if out is not None and st.button("Export the model", key=f"{key}-build", disabled=busy):
        _submit_export(
            key, recipe, {"model": model, "name": name, "gguf": bool(gguf), "out": str(out)}, out.name
        )
    if job is not None and job.state == "done" and job.result and job.result.get("folder"):
        files = job.result.get("files") or []
        st.success(f"Wrote {len(files)} files to {job.result['folder']}: " + ", ".join(files[:8]))


def recipe_inputs(
    base: LoadedTokenizer | None, edited: LoadedTokenizer, report: dict[str, Any] | None
) -> dict[str, Any]:
    """Store an edit's tokenizers (one library zip: ``edited`` and, for an edit of a tokenizer, ``base``) and its
    report as job inputs of this workspace (named by content: the same edit is stored once); the recipe's params
    that name them."""
    data = library_zip({"base": base, "edited": edited} if base is not None else {"edited": edited})
    names = {
        "edited": edited.name,
        **({"base": base.name} if base is not None else {}),
    }  # their library names
    params: dict[str, Any] = {
        "tokenizers": stored_input(store(), current(), data, ".zip", {"job-input": "tokenizers"}),
        "names": names,
    }
    if report is not None:
        params["report"] = stored_json(report, {"job-input": "report"})
    return params
