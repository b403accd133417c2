"""The "Export check" section every exporting page shows (Extend, Prune, Token reuse, SA-BPE, Load & inspect): one
call, :func:`export_check_section`. Behind a button a job of a worker (kind ``export-check``:
:func:`analysis.views.export_check.export_check_job`; its panel re-attaches after a reload) runs the CLI's
`export-check` on the export the page built (pre-flight checks, parity with llama.cpp itself, the round trip before
and after the edit) and shows the typed
report: pass / fail / fixed per check, the per-language parity table and the languages the edit broke, with the
JSON download equal to `python -m analysis export-check --json`.

With server paths off it also checks this workspace's model files (:func:`workspace_files`): the Hugging Face folder
(zip) and the ``.gguf`` that "Export the model into this workspace" made, the model check's edited model, an
uploaded model — each unpacked by the job once by its content as an uploaded model is
(:func:`analysis.model.upload.unpack_model`) and named in the report by its workspace name, never by where the
server keeps it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from analysis.core.outputs import json_document
from analysis.errors import DataError
from analysis.evaluate.speculative import speculative_compatibility
from analysis.texts import flores
from analysis.tokenizer.export import zip_bytes
from analysis.tokenizer.tokenizer import LoadedTokenizer
from analysis.views.export_check import export_check_params
from ui.job_inputs import stored_tokenizers
from ui.jobs import job_panel, stored_input, submit
from ui.workspace import current, json_download, store

from .caching import cache_data
from .errors import try_step
from .pickers import server_path_input

#: Languages checked by default (one per script family the edits touch; all 204 on request).
DEFAULT_LANGS = [
    "eng_Latn",
    "est_Latn",
    "hin_Deva",
    "arb_Arab",
    "zho_Hans",
    "ory_Orya",
    "pan_Guru",
    "rus_Cyrl",
]
STATUS_MARK = {"pass": "✅ pass", "fail": "❌ fail", "fixed": "🔧 fixed", "skip": "➖ skip"}
#: The choice of the page's own export when workspace files are offered beside it.
PAGE_EXPORT = "The export built above"
#: The prefix of a workspace file's choice.
FILE = "Workspace file: "
#: Workspace files the section can check (zipped model folders, GGUF files).
CHECKABLE = (".gguf", ".zip")
#: Workspace items that are a job's inputs (an edit's tokenizers, its report), not exports.
JOB_INPUTS = "job-inputs/"

Export = bytes | LoadedTokenizer | dict[str, LoadedTokenizer] | None


@cache_data(show_spinner=False, max_entries=32)
def _speculative(edited: LoadedTokenizer, base: LoadedTokenizer) -> dict:
    return speculative_compatibility(edited, base).to_json()


def speculative_line(
    edited: LoadedTokenizer, base: LoadedTokenizer, what: str = "The edited tokenizer"
) -> dict:
    """One line on a change page: may llama.cpp pair the edited tokenizer's model with the original's for
    speculative decoding (its draft/target vocabulary rules, :mod:`analysis.evaluate.speculative`); the verdict."""
    spec = _speculative(edited, base)
    verdict = "a valid" if spec["compatible"] else "**not** a valid"
    st.caption(f"Speculative decoding (llama.cpp): {what} and the original are {verdict} draft/target pair — "
               f"{spec['reason']}.")  # fmt: skip
    return spec


def workspace_files() -> list[str]:
    """This workspace's files the export check can take (``.gguf`` files and zipped model folders: model exports,
    the model check's edited model, uploaded models), oldest first; a job's inputs are left out."""
    ws = current()
    if not ws:
        return []
    return [i.name for i in store().items(ws, "artifact")
            if i.has_file and i.name.lower().endswith(CHECKABLE) and not i.name.startswith(JOB_INPUTS)]  # fmt: skip


def _submit(key: str, base: LoadedTokenizer | None, export: Export, langs: list[str], max_lines: int, parity: bool,
            server: Path | None, file: str | None) -> None:  # fmt: skip
    """Submit the ``export-check`` job of a worker for what the section checks (the page's export stored as a job
    input of this workspace, a workspace file or a server path) and attach it to the section."""
    if file is not None:
        what = {"file": file}
    elif server is not None:
        what = {"server": str(server)}
    else:
        if isinstance(export, LoadedTokenizer):
            export = zip_bytes(export, None, folder="export")
        if export is None:
            raise DataError("nothing exported yet")
        what = {"zip": stored_input(store(), current(), export, ".zip", {"job-input": "export"})}
    based = stored_tokenizers({base.name: base}, "export check base") if base is not None else None
    params = export_check_params(what, based, langs, max_lines, parity)
    submit(
        f"{key}-job",
        "export-check",
        params,
        label=f"Export check: {file or (server and server.name) or 'export'}",
    )


def export_check_section(key: str, base: LoadedTokenizer | None, export: Export = None) -> None:
    """The Export check section: `export` is what the page exports (its download zip, an edited tokenizer, or a
    choice of them by label; None: only a server path), `base` the original tokenizer (the round trip before and
    after; None for an unedited tokenizer)."""
    st.subheader("Export check")
    st.caption(
        "Pre-flight checks (ids fit, special ids across the config files, the chat template both ways, fields older "
        "readers choke on), tokenization parity with llama.cpp itself (a GGUF written on the fly) and the languages "
        "whose held-out lines no longer decode to themselves — the CLI's `export-check`."
    )
    c1, c2, c3 = st.columns([3, 1, 1])
    langs = c1.multiselect(
        "FLORES languages", flores.available_codes(), default=DEFAULT_LANGS, key=f"{key}-langs"
    )
    max_lines = int(c2.number_input("Held-out lines each", 1, 212, 50, key=f"{key}-lines"))
    parity = c3.checkbox("Parity with llama.cpp", value=True, key=f"{key}-parity")
    own = list(export) if isinstance(export, dict) else ([PAGE_EXPORT] if export is not None else [])
    files = [FILE + n for n in workspace_files()]
    choice = None
    if (isinstance(export, dict) and export) or files:
        choice = st.selectbox("Export to check", own + files, key=f"{key}-which",
                              help="the page's own export, or a file of this workspace (the model exported into "
                              "it, the model check's edited model, an uploaded model)")  # fmt: skip
    file = choice.removeprefix(FILE) if choice in files else None
    if isinstance(export, dict):
        export = export.get(choice) if choice in export else (export[own[0]] if own else None)
    server = server_path_input("…or check an export folder or .gguf file on the server", f"{key}-path")
    ready = export is not None or server is not None or file is not None
    if st.button("Run the export check", key=f"{key}-run", disabled=not ready):
        try_step(_submit, key, base, export, langs or DEFAULT_LANGS, max_lines, parity, server, file)
    job = job_panel(f"{key}-job", "Export check")  # a worker runs it; shown again after a reload
    if job is not None and job.state == "done" and job.result:
        st.session_state[f"{key}-report"] = job.result
        show_report(job.result, key)


def show_report(doc: dict, key: str) -> None:
    """The typed report: verdict, checks, GGUF, parity per language, round trip; the JSON download."""
    failed = [f"- **{c['name']}**: {c['detail']}" for c in doc["checks"] if c["status"] == "fail"]
    (st.success if doc["ok"] else st.error)(
        f"**{doc['path']}** ({doc['kind']}): {'ok' if doc['ok'] else 'NOT ok'}"
        + "".join(f"\n{f}" for f in failed)
    )
    if doc["checks"]:
        rows = [{"check": c["name"], "status": STATUS_MARK.get(c["status"], c["status"]), "detail": c["detail"]}
                for c in doc["checks"]]  # fmt: skip
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    par = doc.get("parity")
    if par is not None:
        if par["blocked"]:
            st.warning(f"Parity with llama.cpp: blocked — {par['blocked']}")
        else:
            tot = par["totals"]["all"]
            st.markdown(
                f"**Parity with llama.cpp** ({par['gguf']}): {tot['identical']:,} of {tot['lines']:,} lines identical "
                f"({100 * tot['share']:.2f} %), {tot['explained']:,} explained as llama.cpp's own, "
                f"{tot['lines'] - tot['identical'] - tot['explained']:,} unexplained"
            )
            rows = [{"lang": e["lang"], "kind": e["kind"], "lines": e["lines"], "identical %": 100 * e["share"],
                     "explained": e["explained"], "unexplained": e["unexplained"], "reason": e["reason"] or "",
                     "first difference": (e["first_diff"] or {}).get("text", "")[:80]}
                    for e in par["languages"]]  # fmt: skip
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                         column_config={"identical %": st.column_config.NumberColumn(format="%.2f")})  # fmt: skip
    spec = doc.get("speculative")
    if spec is not None:
        (st.success if spec["compatible"] else st.warning)(
            f"**Speculative decoding with the original** (llama.cpp's draft/target rules): "
            f"{'compatible' if spec['compatible'] else 'not compatible'} — {spec['reason']}"
        )
    rt = doc.get("roundtrip")
    if rt is not None:
        st.markdown(
            f"**Round trip before → after:** {rt['broken']} of {rt['languages']} languages broken by the edit"
        )
        if rt["note"]:
            st.info(rt["note"])
        if rt["unexpected"]:
            st.error(f"Not the method's own price: {', '.join(rt['unexpected'])}")
        if rt["entries"]:
            st.dataframe(pd.DataFrame([{"lang": e["lang"], "role": e.get("role", ""), "text": e["text"][:100],
                                        "decoded": e["decoded"][:100]} for e in rt["entries"]]),
                         hide_index=True, width="stretch")  # fmt: skip
    lp = doc.get("logprobs")
    if lp is not None:
        st.markdown(
            f"**llama.cpp vs Hugging Face** (next-token log-probabilities, {lp['tokens']} tokens of held-out text): "
            f"mean |Δ| {lp['mean_abs_diff']:.4f} nats, max {lp['max_abs_diff']:.3f}, same top-1 "
            f"{100 * lp['top1_same']:.1f} %"
        )
        st.caption(lp["expected"])
    if doc.get("gguf"):
        with st.expander("GGUF metadata"):
            st.json(doc["gguf"])
    json_download("Download the export check (JSON)", json_document(doc), "export_check.json", key=f"{key}-dl",
                       help="the document `python -m analysis export-check --json` prints")  # fmt: skip
