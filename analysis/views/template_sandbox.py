"""Chat templates rendered in a separate, limited process: the one place every template render goes through.

:func:`render_template` sends a template and its variables to a rendering process
(:mod:`analysis.views.template_worker`, which holds the limits) and returns the text, or raises one
:class:`~analysis.errors.DataError` whatever went wrong — a template error, a limit passed (time, memory, output),
a process that died. The caller's process (the app's server, the CLI) never runs template code, so a hostile
template costs one process for at most :data:`~analysis.views.template_worker.TIME_LIMIT_S` seconds and
:data:`~analysis.views.template_worker.MEMORY_LIMIT_BYTES` of memory, while every other session goes on.

Processes are kept between renders (starting one costs ~0.1 s; a render on a kept one ~1 ms): renders running at
the same time each take their own process (at most :data:`MAX_RENDERS` at once), and up to :data:`MAX_IDLE` wait
for the next. A process that timed out, died or ran out of memory is not reused.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from analysis.errors import DataError

from . import template_worker as limits

#: Renders that may run at the same time (each in its own process, each up to the memory limit).
MAX_RENDERS = 4
#: Processes kept waiting for the next render.
MAX_IDLE = 2
WORKER = Path(limits.__file__).resolve()


class _Limit(Exception):
    """A render that did not answer: the message says why."""


class _Worker:
    """One rendering process and its pipes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the terminal is the caller's to handle
        )

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc.poll() is None

    def close(self) -> None:
        """End the process (killed: it may be inside an endless loop)."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def _read(self, n: int, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        data = b""
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise _Limit(
                    f"it ran longer than {limits.TIME_LIMIT_S:g} s, the limit for a chat template "
                    f"({limits.limits_text()}): an endless or very long loop?"
                )
            chunk = os.read(fd, min(n - len(data), 1 << 20))
            if not chunk:
                raise _Limit(self._died())
            data += chunk
        return data

    def _died(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return (
            f"the process rendering it stopped (exit status {code}); a template that needs more than the limits "
            f"for a chat template ({limits.limits_text()}) ends this way"
        )

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its answer, at most the time limit (then the process is killed)."""
        body = json.dumps(payload).encode("ascii")
        deadline = time.monotonic() + limits.TIME_LIMIT_S
        try:
            self.proc.stdin.write(limits.HEADER.pack(len(body)) + body)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _Limit(self._died()) from None
        (size,) = limits.HEADER.unpack(self._read(limits.HEADER.size, deadline))
        if size > limits.FRAME_LIMIT_BYTES:
            raise _Limit(f"its answer is {size:,} bytes, over {limits.FRAME_LIMIT_BYTES:,}")
        return json.loads(self._read(size, deadline))


_LOCK = threading.Lock()
_IDLE: list[_Worker] = []
_SLOTS = threading.BoundedSemaphore(MAX_RENDERS)


def _take() -> _Worker:
    with _LOCK:
        while _IDLE:
            w = _IDLE.pop()
            if w.alive():
                return w
            w.close()
    try:
        return _Worker()
    except OSError as e:
        raise DataError(f"cannot start the process that renders chat templates: {e.strerror or e}") from None


def _give_back(w: _Worker) -> None:
    with _LOCK:
        if len(_IDLE) < MAX_IDLE and w.alive():
            _IDLE.append(w)
            return
    w.close()


@atexit.register
def close_all() -> None:
    """End the waiting rendering processes (also at exit; the next render starts a new one)."""
    with _LOCK:
        idle = list(_IDLE)
        _IDLE.clear()
    for w in idle:
        w.close()


def check_source(source: str) -> str:
    """A template's source, refused when it is longer than a rendered conversation may be."""
    if len(source) > limits.OUTPUT_LIMIT_CHARS:
        raise _Limit(f"it is {len(source):,} characters long, over {limits.OUTPUT_LIMIT_CHARS:,}")
    return source


def render_template(source: str, context: dict[str, Any], what: str = "the chat template") -> str:
    """`source` rendered with `context` (JSON values) in a limited process; DataError "<what> failed: <why>"."""
    try:
        payload = {"source": check_source(source), "context": context}
        if not _SLOTS.acquire(timeout=limits.TIME_LIMIT_S * 2):
            raise _Limit("too many chat templates are being rendered at once; try again in a moment")
        try:
            w = _take()
            try:
                answer = w.request(payload)
            except BaseException:
                w.close()
                raise
            if answer.get("recycle"):
                w.close()
            else:
                _give_back(w)
        finally:
            _SLOTS.release()
    except _Limit as e:
        raise DataError(f"{what} failed: {e}") from None
    if "error" in answer:
        raise DataError(f"{what} failed: {answer['error']}")
    text = answer.get("text")
    if not isinstance(text, str):
        raise DataError(f"{what} failed: the rendering process gave no text")
    return text
