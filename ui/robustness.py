"""The robustness section of the change pages (Extend, Prune, Token reuse): the `robustness` entry of an edit's
report (:mod:`analysis.measure.robustness`) as tables — words kept whole per held-out language before → after,
and per tokenizer the digit grouping, the hostile round trip and the encode times on pathological inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from analysis.core.progress import Progress

from .progress import progress


def robustness_section(rob: dict[str, Any] | None) -> None:
    """Show one edit's robustness before → after (nothing when it was not measured)."""
    if not rob:
        return
    st.markdown("**Robustness before → after**")
    st.caption("Words kept whole = the single-token retention rate (STRR; TokLens, ACL 2026 workshop): the share "
               "of words (maximal runs of Unicode word characters) one token covers, in context.")  # fmt: skip
    if rob["languages"]:
        rows = [{"Language": r["lang"], "Words": r["words"], "STRR before": f"{r['strr_before']:.2%}",
                 "STRR after": f"{r['strr_after']:.2%}", "Words split differently": f"{r['split_changed']:.2%}"}
                for r in rob["languages"]]  # fmt: skip
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    sides = []
    for label in ("before", "after"):
        d = rob[label]
        g = d["digits"]
        worst = max(d["encode_seconds"], key=lambda e: e["seconds"], default=None)
        sides.append({
            "": label,
            "Digits right-aligned": f"{g['right']:.0%}",
            "left-aligned": f"{g['left']:.0%}",
            "single digits": f"{g['single']:.0%}",
            "other": f"{g['other']:.0%}",
            "Round trip (hostile texts)": f"{d['round_trip']['ok']}/{d['round_trip']['total']}",
            "Slowest 512 KiB encode": f"{worst['seconds']:.2f} s ({worst['input']})" if worst else "—",
            "≥ 1 s": ", ".join(e["input"] for e in d["encode_seconds"] if e["slow"]) or "none",
        })  # fmt: skip
    st.dataframe(pd.DataFrame(sides), hide_index=True, width="stretch")
    fails = rob["after"]["round_trip"]["failures"]
    if fails:
        with st.expander(f"Hostile texts that do not come back after the edit ({len(fails)})"):
            st.dataframe(pd.DataFrame([{"input": f["input"], "text": repr(f["text"]), "decoded": repr(f["decoded"])}
                                       for f in fails]), hide_index=True, width="stretch")  # fmt: skip
    for note in rob.get("notes", []):
        st.caption(note)


def measured(key: str, ident: tuple) -> bool:
    """Whether :func:`robustness_button` `key` has measured this edit (`ident`): a page's equivalent command then
    measures robustness too, else it says --no-robustness."""
    got = st.session_state.get(key)
    return got is not None and got[0] == ident


def robustness_button(
    key: str, ident: tuple, compute: Callable[[Progress], dict[str, Any]]
) -> dict[str, Any] | None:
    """A button that measures an edit's robustness (`compute(progress)` → the document; a few seconds: the encode
    times of 512 KiB inputs), then the section; the document, once measured for this edit (`ident`)."""
    if st.button("Measure robustness before → after", key=f"{key}-run",
                 help="words kept whole per held-out language, digit grouping, round trip on hostile text, "
                 "encode times on pathological inputs"):  # fmt: skip
        with progress("Measuring robustness before → after") as cb:
            st.session_state[key] = (ident, compute(cb))
    got = st.session_state.get(key)
    if got is None or got[0] != ident:
        return None
    robustness_section(got[1])
    return got[1]
