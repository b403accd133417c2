"""One progress protocol for every long-running engine call.

A long call takes ``progress: Progress | None``: a callable ``progress(done, total, message)``. ``done`` and
``total`` are in the call's own units (merges, languages, bytes, candidates); ``total`` is None when unknown.
Pages adapt it to a progress bar (``ui``), the CLI to a line on stderr (:func:`stderr_progress`), tests to a
list. A callback may raise :class:`Cancelled` to stop the work (the Stop button); engines that keep partial
results say so in their docstrings.

Helpers: :func:`report` (None-safe call), :func:`scaled` (a sub-task reported as a slice of its parent's 0..1
range), :func:`fraction`.
"""

from __future__ import annotations

import re
import sys
import time
from typing import Protocol

from analysis.errors import AnalysisError


class Progress(Protocol):
    """``progress(done, total, message)``: `done` of `total` units finished (`total` None when unknown)."""

    def __call__(self, done: float, total: float | None, message: str = "") -> None: ...


class Cancelled(AnalysisError):
    """Raised by a progress callback to stop a long computation (the work done so far may be kept)."""


def fraction(done: float, total: float | None) -> float | None:
    """`done / total` clipped to 0..1, or None when the total is unknown or zero."""
    if not total:
        return None
    return min(1.0, max(0.0, float(done) / float(total)))


def report(progress: Progress | None, done: float, total: float | None, message: str = "") -> None:
    """Call `progress` if there is one."""
    if progress is not None:
        progress(done, total, message)


def scaled(progress: Progress | None, start: float, end: float) -> Progress | None:
    """A callback for a sub-task that reports into the slice `start..end` of a 0..1 parent progress."""
    if progress is None:
        return None

    def sub(done: float, total: float | None, message: str = "") -> None:
        f = fraction(done, total)
        progress(start + (end - start) * (f if f is not None else 0.0), 1.0, message)

    return sub


def _stage(message: str) -> str:
    """A progress message without its numbers: "warm-up step 3/10" and "warm-up step 4/10" are one stage."""
    return re.sub(r"\d+", "#", message)


def stderr_progress(label: str, *, every: float = 1.0, stream=None) -> Progress:
    """A CLI callback: at most one `label: 42% message` line per `every` seconds on stderr, plus the last and
    the first of each named stage (a message that differs from the last shown by more than its numbers)."""
    out = stream or sys.stderr
    last = [float("-inf"), None]  # the first report always shows

    def show(done: float, total: float | None, message: str = "") -> None:
        now = time.monotonic()
        f = fraction(done, total)
        final = f is not None and f >= 1.0
        new_stage = bool(message) and _stage(message) != last[1]
        if not final and not new_stage and now - last[0] < every:
            return
        last[0] = now
        if message:
            last[1] = _stage(message)
        amount = f"{f:.0%}" if f is not None else f"{done:,.0f}"
        out.write(f"{label}: {amount}{' ' + message if message else ''}\n")
        out.flush()

    return show
