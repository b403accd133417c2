"""The Streamlit side of the engine's progress protocol (`analysis.core.progress.Progress`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from analysis.core.progress import Progress, fraction
from analysis.tokenizer.tokenizer import LoadedTokenizer


def progress_bar(text: str, *, unit: str = "") -> tuple[Progress, object]:
    """A progress bar and the engine callback that drives it (at most ~100 redraws); returns (callback, bar).

    The bar shows `text`, the callback's message and, for byte counts (`unit="MB"`), the amount so far.
    """
    bar = st.progress(0.0, text=text)
    last = [-1.0]

    def update(done: float, total: float | None, message: str = "") -> None:
        f = fraction(done, total)
        shown = f if f is not None else 0.0
        if f is not None and shown - last[0] < 0.01 and shown < 1.0:
            return
        last[0] = shown
        amount = f" {done / 1e6:.1f} MB" if unit == "MB" else ""
        bar.progress(shown, text=f"{text}{amount}{' · ' + message if message and unit != 'MB' else ''}")

    return update, bar


@contextmanager
def progress(text: str, *, unit: str = "") -> Iterator[Progress]:
    """`with progress("Training…") as cb: engine(..., progress=cb)`: a bar that disappears when the block ends,
    also when it raises."""
    update, bar = progress_bar(text, unit=unit)
    try:
        yield update
    finally:
        bar.empty()


#: Vocabularies larger than this start a page's slow part (a replay of every merge, a pruning) on a button, so that
#: the page's first view is not kept waiting for it.
AUTO_START_VOCAB = 100_000


def start_now(tok: LoadedTokenizer, key: str, label: str, why: str, *, primary: bool = False) -> bool:
    """Whether to run a slow part of a page now: at once for vocabularies up to :data:`AUTO_START_VOCAB` tokens,
    else once its button (`label`, widget `key`) was pressed for this tokenizer in this session; until then a
    caption says `why` it waits."""
    done = f"{key}-on-{tok.content_hash}"
    if tok.vocab_size <= AUTO_START_VOCAB or st.session_state.get(done):
        return True
    if st.button(label, key=key, type="primary" if primary else "secondary"):
        st.session_state[done] = True
        return True
    st.caption(f"{tok.vocab_size:,} tokens: {why}, so it starts on the button.")
    return False
