"""The app's one error boundary (app.py runs every page and the sidebar inside it) and the one helper for a
sub-step whose failure must not stop the rest of the page.

An `AnalysisError` (bad input: a corrupt file, an unknown language, a feature that does not apply) is shown as
its message, with server paths shortened (`analysis.core.paths.public_text`). Anything else is a bug: the user sees a short box with the exception's type and message, the
traceback goes to the server log and into a collapsed "Details" expander. Streamlit's own control flow
(`st.rerun`, `st.stop`, `st.switch_page`) raises `BaseException` subclasses, which pass through untouched.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import streamlit as st

from analysis import AnalysisError
from analysis.core.paths import public_text
from analysis.errors import is_rust_panic

LOG = logging.getLogger("toklab.ui")
T = TypeVar("T")


def show_error(e: Exception) -> None:
    """Show an exception in the page: an AnalysisError's message, or a short box for a bug (traceback logged)."""
    if isinstance(e, AnalysisError):
        st.error(public_text(str(e)), icon=":material/error:")
        return
    LOG.error("unexpected %s in the app", type(e).__name__, exc_info=e)
    st.error(
        public_text(
            f"Something went wrong: {type(e).__name__}: {e}. This is a bug in Tokenizer Lab, not in your input."
        ),
        icon=":material/bug_report:",
    )
    with st.expander("Details", expanded=False):  # the whole traceback is in the server's log
        st.code(public_text("".join(traceback.format_exception(e))), language=None)


@contextmanager
def boundary() -> Iterator[None]:
    """Show any `Exception` raised inside the block (see `show_error`) instead of a traceback page.

    A panic in a Rust library (`pyo3_runtime.PanicException`, a BaseException) is shown too: the loaders check
    inputs so that none is expected, but one must never make an action silently do nothing.
    """
    try:
        yield
    except Exception as e:  # noqa: BLE001 - the boundary; Streamlit's rerun/stop signals are BaseExceptions
        show_error(e)
    except BaseException as e:
        if not is_rust_panic(e):
            raise
        LOG.error("Rust panic in the app", exc_info=e)
        st.error(public_text(f"A library failed on this input (Rust panic: {e})."), icon=":material/error:")


def try_step(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """`fn(*args, **kwargs)`, or None after showing its AnalysisError, so that the page goes on rendering.

    Only for a step the rest of the page does not need (one tokenizer among several, one optional panel);
    everything else lets the error reach the boundary. Other exceptions always propagate.
    """
    try:
        return fn(*args, **kwargs)
    except AnalysisError as e:
        show_error(e)
        return None
