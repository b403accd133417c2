"""Transplant: give a model another tokenizer — the rows of tokens both vocabularies have are copied, the rest
initialised — and measure the result like every edit (bits per byte per language on the same bytes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from analysis.adapt.embeddings import INIT_HELP, INITS
from analysis.adapt.transplant import DEFAULT_K
from analysis.commands._equivalent import transplant_command
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.evaluate.model_check import DEFAULT_LANGS, PAGE_LINES
from ui.jobs import attached
from ui.model_check import model_check_section, recipe_inputs
from ui.pickers import pick_model, pick_tokenizer

st.title("Transplant")
st.caption(
    "Give a model another tokenizer. Tokens the two vocabularies share — the same bytes, whatever the spelling "
    "(`Ġ`, `▁`, `<0xNN>`) — keep the model's rows; special tokens are matched by text, then by role (bos, eos, "
    "pad, unk, chat markers); every other token's row is initialised: OMP (Goddard & Fernandes Neto 2025: the "
    "token coded over the shared tokens; without a donor model it gives the FVT row), FVT, mean, MVN or random. The result is measured "
    "against the original model on the same held-out bytes."
)
model = pick_model("tp-model", "Model (A)", optional=True)
tok = pick_tokenizer("Tokenizer it gets (B)", "tp-tok")
c1, c2 = st.columns([3, 1])
init = c1.selectbox("Rows of B's tokens the model lacks", INITS, index=INITS.index("omp"), key="tp-init",
                    format_func=lambda i: f"{i} — {INIT_HELP[i]}")  # fmt: skip
k = c2.number_input("OMP atoms (k)", 1, 256, DEFAULT_K, key="tp-k", disabled=init != "omp",
                    help="OMP costs grow with k: on a CPU, k = 64 codes Qwen3's 112k new tokens for SmolLM2 in under 3 CPU-minutes")  # fmt: skip
if init == "omp":
    st.caption(
        "OMP codes every new token over the shared tokens' rows: on a CPU expect minutes for a 100k-token "
        "vocabulary. Without a donor model (the CLI's `--donor`) its rows are FVT's, the row it codes."
    )


def _page(model: str, tok: Any) -> None:
    """The command, the transplant as a background job with its model check, and where the rows came from."""

    shown_model = paths.shown_path(model) if not model.startswith("hub:") else model[4:]
    every = st.session_state.get("tp-check-all", False)  # the model check's choices below (last run's)
    command = transplant_command(model, tok, init=init, k=int(k), lines=int(st.session_state.get("tp-check-lines", PAGE_LINES)),
                                 langs=["all"] if every else st.session_state.get("tp-check-langs", list(DEFAULT_LANGS)))  # fmt: skip
    st.caption(command.caption() + " The model check's languages and lines are those chosen below.")
    st.code(command.text(), language="bash", wrap_lines=True)

    def _recipe() -> dict[str, Any]:
        """The transplant and its check run in a worker: B travels as a workspace item."""
        return {"op": "transplant", "init": init, "k": int(k), **recipe_inputs(None, tok, None)}

    model_check_section("tp-check", f"{Path(shown_model).name} ← {tok.name}", _recipe, original=model,
                        bakeoff=False)  # fmt: skip

    job = attached("tp-check")
    done = job is not None and job.state == "done"
    doc = (job.result or {}).get("edit_report") if done else None
    if doc:
        st.subheader("Where the rows came from")
        st.write(f"**{doc['rows']:,}** rows: **{doc['copied']:,}** copied from the model, **{doc['initialised']:,}** "
                 f"initialised ({doc['init']}); {doc['seconds']:.0f} s, peak memory "
                 f"{doc['peak_rss_bytes'] / 2**30:.2f} GiB.")  # fmt: skip
        st.dataframe(pd.DataFrame(doc["roles"]), hide_index=True)
        for n in doc["notes"] + doc["warnings"]:
            st.warning(n, icon=":material/info:")
        st.download_button("Download transplant_report.json", json_document(doc), file_name="transplant_report.json",
                           mime="application/json", key="tp-report")  # fmt: skip


if (
    not model or tok is None
):  # no stop of the script run here: the app frame draws the sidebar library after the page
    st.info("Choose the model and the tokenizer it should get.")
else:
    _page(model, tok)
