"""The process that renders chat templates, and the one home of their limits.

A chat template is a program that came with a tokenizer anyone can upload. Jinja2's sandbox keeps it away from
Python's internals and bounds `range`, but not a string repeated a billion times, an output of gigabytes, three
nested loops that run for hours or a macro that calls itself. So templates are rendered here, in a separate
process that :mod:`analysis.views.template_sandbox` starts (``python -I template_worker.py``) and talks to over
its stdin/stdout, under limits that hold whatever the template does:

* memory — the process's address space is capped (`RLIMIT_AS`, :data:`MEMORY_LIMIT_BYTES`): an allocation past it
  is a `MemoryError` here, never a server that swaps or is killed;
* time — :data:`TIME_LIMIT_S` of wall-clock time per render: the caller kills the process when it has not
  answered, and a watchdog thread here ends it a moment later should the caller be gone;
* output — :data:`OUTPUT_LIMIT_CHARS` characters, counted while the template streams its output, and checked
  before a `*` repeats a string or a list (the sandbox's operator hook) so that `'x' * 10**9` ends at once.

Every failure, whatever its type, is answered as one message (``{"error": …}``). This file imports only the
standard library and jinja2: it runs as a script, without the engine.

Protocol: each request and each answer is a 4-byte big-endian length and that many bytes of UTF-8 JSON.
Request ``{"source": str, "context": {…}}``; answer ``{"text": str}`` or ``{"error": str, "recycle": bool}``
(``recycle``: the process should not be reused, e.g. after running out of memory).
"""

from __future__ import annotations

import json
import os
import resource
import struct
import sys
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

#: Wall-clock seconds one render may take.
TIME_LIMIT_S = 10.0
#: Characters a rendered conversation may have (and the longest string or list a `*` may make).
OUTPUT_LIMIT_CHARS = 1_000_000
#: Address space of the rendering process (Python and jinja2 themselves take ~30 MB of it).
MEMORY_LIMIT_BYTES = 1 << 30
#: Longest request or answer frame (the messages are bounded by the input readers; an answer by the output cap).
FRAME_LIMIT_BYTES = 64 << 20
#: Compiled templates kept per process.
CACHED_TEMPLATES = 16
#: Bits a `**` may produce (an integer of a million bits is 300,000 digits).
POWER_LIMIT_BITS = 1_000_000

HEADER = struct.Struct(">I")


def limits_text() -> str:
    """The limits in words, for messages and docs."""
    return (
        f"{TIME_LIMIT_S:g} s, {OUTPUT_LIMIT_CHARS:,} characters of output and "
        f"{MEMORY_LIMIT_BYTES >> 20:,} MB of memory"
    )


class OutputLimit(Exception):
    """The template's output (or a string it builds) passes :data:`OUTPUT_LIMIT_CHARS`."""


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox whose `*` refuses to build a string or list past the output limit and whose `**`
    refuses an integer past :data:`POWER_LIMIT_BITS` (before computing either)."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """`left operator right`, checked first."""
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if (
                    isinstance(seq, (str, list, tuple))
                    and isinstance(n, int)
                    and len(seq) * n > OUTPUT_LIMIT_CHARS
                ):
                    raise OutputLimit(
                        f"it makes {len(seq) * n:,} items by repeating {len(seq):,} of them {n:,} times"
                    )
        if (
            operator == "**"
            and isinstance(left, int)
            and isinstance(right, int)
            and abs(left) > 1
            and right > 0
        ):
            if right * abs(left).bit_length() > POWER_LIMIT_BITS:
                raise OverflowError(f"{left} ** {right} is a number too large")
        return super().call_binop(context, operator, left, right)


def _environment() -> BoundedSandbox:
    """The sandbox with the helpers transformers gives chat templates."""

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def render(env: Any, cache: OrderedDict, source: str, context: dict[str, Any]) -> str:
    """The template's output, streamed and counted (OutputLimit past the cap)."""
    template = cache.get(source)
    if template is None:
        template = env.from_string(source)
        cache[source] = template
        while len(cache) > CACHED_TEMPLATES:
            cache.popitem(last=False)
    cache.move_to_end(source)
    parts, n = [], 0
    for piece in template.generate(**context):
        n += len(piece)
        if n > OUTPUT_LIMIT_CHARS:
            raise OutputLimit(f"its output passed {OUTPUT_LIMIT_CHARS:,} characters")
        parts.append(piece)
    return "".join(parts)


def failure(e: BaseException) -> dict[str, Any]:
    """An exception of a render as the answer: one message, and whether the process should be replaced."""
    limit = f"the limit for a chat template ({limits_text()})"
    if isinstance(e, OutputLimit):
        return {"error": f"{e}, over {limit}", "recycle": False}
    if isinstance(e, MemoryError):
        return {
            "error": f"it needed more than {MEMORY_LIMIT_BYTES >> 20:,} MB of memory, over {limit}",
            "recycle": True,
        }
    if isinstance(e, RecursionError):
        return {
            "error": "it calls itself too deeply (a macro that never stops calling itself?)",
            "recycle": True,
        }
    if isinstance(e, OverflowError):
        return {"error": f"a number is too large ({e})", "recycle": False}
    if isinstance(e, jinja2.exceptions.TemplateError):
        return {"error": str(e) or type(e).__name__, "recycle": False}
    return {"error": f"{type(e).__name__}: {e}", "recycle": False}


def _read_exact(stream: Any, n: int) -> bytes | None:
    """`n` bytes from `stream`, or None at its end."""
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _limit_memory(limit: int) -> None:
    """Cap this process's address space (where the platform allows it)."""
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ValueError, OSError):
        pass


def serve(stdin: Any, stdout: Any) -> None:
    """Answer requests until stdin ends; the process ends itself when a render outlasts the time limit."""
    env = _environment()
    cache: OrderedDict = OrderedDict()
    while True:
        head = _read_exact(stdin, HEADER.size)
        if head is None:
            return
        (size,) = HEADER.unpack(head)
        if size > FRAME_LIMIT_BYTES:
            return
        body = _read_exact(stdin, size)
        if body is None:
            return
        watchdog = threading.Timer(TIME_LIMIT_S + 2.0, os._exit, args=(3,))
        watchdog.daemon = True
        watchdog.start()
        try:
            request = json.loads(body)
            answer: dict[str, Any] = {"text": render(env, cache, request["source"], request["context"])}
        except BaseException as e:  # noqa: BLE001 - every failure of a template is an answer
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            answer = failure(e)
        finally:
            watchdog.cancel()
        try:
            data = json.dumps(answer).encode("ascii")  # ASCII: lone surrogates travel as escapes
        except MemoryError:
            data = json.dumps(failure(MemoryError())).encode()
        stdout.write(HEADER.pack(len(data)) + data)
        stdout.flush()


def main() -> None:
    """Run as the rendering process: cap memory, then serve stdin/stdout."""
    _limit_memory(MEMORY_LIMIT_BYTES)
    sys.setrecursionlimit(1000)
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
