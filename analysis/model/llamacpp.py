"""llama.cpp itself, through `llama-cpp-python`: load a GGUF (vocabulary only, or with its weights), tokenize with
llama.cpp's own tokenizer, and read next-token log-probabilities.

`llama-cpp-python` is built from its PyPI source distribution (requirements-llama.txt; scripts/venv.sh passes the
CMake flags; scripts/start.sh builds it in the background while the app serves); where it is missing,
:func:`require_llama_cpp` raises ModelLoadError saying whether it is still being built (since when, its log) or how
to install it, and the export check reports the parity part as blocked instead of failing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import ModelLoadError

#: What llama.cpp's tokenizer cannot do the way Hugging Face `tokenizers` does, with the upstream issue.
LLAMA_CPP_ISSUES = {
    "normalizer": (
        "llama.cpp applies no Unicode normalizer ({form}) before a BPE tokenizer: the Hugging Face tokenizer "
        "normalizes the text first (ggml-org/llama.cpp #6980: normalizers cannot be configured in llama.cpp)"
    ),
    "spm_space": (
        "llama.cpp's SentencePiece tokenizer puts a space (▁) before the text at the start and after every special "
        "token even where the text already starts with one; Hugging Face's Metaspace (prepend_scheme 'first') does "
        "not (ggml-org/llama.cpp #23840, #8584): the same text, a different split of its spaces"
    ),
}


def llama_cpp_available() -> bool:
    """Whether `llama_cpp` imports."""
    try:
        require_llama_cpp()
    except ModelLoadError:
        return False
    return True


#: How to install llama.cpp by hand (the pinned llama-cpp-python, built with scripts/venv.sh's flags).
INSTALL_HINT = (
    "install it with `bash -c 'source scripts/venv.sh && ensure_venv .venv requirements-llama.txt'` (or "
    "`pip install -r requirements-llama.txt`): llama-cpp-python builds llama.cpp from source, 3–10 min on 2 cores "
    "(docs/model-check.md, 'Export')"
)


def build_state(prefix: str | os.PathLike | None = None) -> str:
    """What scripts/start.sh's background build of requirements-llama.txt into this environment is doing, in
    words: "" when none was started here (or it finished), else that it is running (since when, its log), was
    interrupted or failed. It reads the marker files that `build_in_background` (scripts/venv.sh) keeps in the
    virtual environment (`prefix`, default `sys.prefix`)."""
    venv = Path(prefix or sys.prefix)
    failed = venv / ".toklab-requirements-llama.txt.failed"
    building = venv / ".toklab-requirements-llama.txt.building"
    try:
        if failed.is_file():
            log = failed.read_text(encoding="utf-8", errors="replace").strip()
            return f"the background build of llama.cpp failed (log {_shown(log)})"
        if not building.is_file():
            return ""
        lines = building.read_text(encoding="utf-8", errors="replace").split("\n")
        pid, started, log = int(lines[0]), float(lines[1]), lines[2].strip()
    except (OSError, ValueError, IndexError):
        return ""
    when = time.strftime("%H:%M", time.localtime(started))
    minutes = max(0, round((time.time() - started) / 60))
    if not _alive(pid):
        return f"the background build of llama.cpp started at {when} was interrupted (log {_shown(log)})"
    return (
        f"llama.cpp is still being built (started {when}, {minutes} min ago; log {_shown(log)}): 3–10 min on 2 "
        "cores in all; the parity check works once it is done, without a restart"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def _shown(path: str) -> str:
    """A log path relative to the working folder (the repository) when it lies inside it, else its name."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        return p.name


def require_llama_cpp() -> Any:
    """The `llama_cpp` module, or ModelLoadError saying why it is missing (still being built in the background by
    scripts/start.sh, a failed build, or not installed) and how to get it."""
    try:
        import llama_cpp  # noqa: PLC0415 - optional and heavy, loaded on use
    except (ImportError, OSError) as e:  # OSError: the shared library failed to load
        state = build_state()
        if state.startswith("llama.cpp is still being built"):
            raise ModelLoadError(state) from e
        why = state or f"llama-cpp-python is not installed ({type(e).__name__}: {e})"
        raise ModelLoadError(f"{why}; {INSTALL_HINT}") from e
    return llama_cpp


def open_gguf(path: str | os.PathLike, *, vocab_only: bool = True, n_ctx: int = 512) -> Any:
    """A `llama_cpp.Llama` over a GGUF file (quiet; vocabulary only unless asked for the weights)."""
    llama_cpp = require_llama_cpp()
    p = Path(path)
    if not p.is_file():
        raise ModelLoadError(f"{p.name}: no such GGUF file")
    try:
        return llama_cpp.Llama(
            str(p), vocab_only=vocab_only, verbose=False, n_ctx=n_ctx, logits_all=not vocab_only, n_threads=2
        )
    except (ValueError, RuntimeError, OSError) as e:
        raise ModelLoadError(f"{p.name}: llama.cpp cannot load this GGUF file ({e})") from e


def llama_tokenize(llm: Any, text: str, *, add_special: bool = True) -> list[int]:
    """llama.cpp's ids for `text`: special tokens in the text parsed as such (as Hugging Face does), BOS/EOS
    added per the file's `add_bos_token`/`add_eos_token` when `add_special`.

    Calls `llama_tokenize` once, into a buffer sized from the text: `Llama.tokenize` allocates the model's whole
    training context per call and, for a vocabulary-only file (context 0), tokenizes every text twice (the first
    call only learns the length) — half of an export check's time went there."""
    data = text.encode("utf-8")
    vocab = getattr(getattr(llm, "_model", None), "vocab", None)
    if vocab is None:  # not the llama-cpp-python this project pins: its public call
        return list(llm.tokenize(data, add_bos=add_special, special=True))
    llama_cpp = require_llama_cpp()
    cap = len(data) + 8  # a token spells at least one byte, bar BOS/EOS and a SentencePiece space prefix
    while True:
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, cap, add_special, True)
        if n >= 0:
            return buf[:n]
        if -n <= cap:
            raise ModelLoadError(f"llama.cpp could not tokenize a text of {len(data)} bytes (returned {n})")
        cap = -n


def llama_logprobs(llm: Any, ids: list[int]) -> np.ndarray:
    """Next-token log-probabilities (float64, shape [len(ids), n_vocab]) of a GGUF model in llama.cpp."""
    if len(ids) > llm.n_ctx():
        raise ModelLoadError(f"{len(ids)} tokens do not fit llama.cpp's context of {llm.n_ctx()}")
    llm.reset()
    llm.eval(ids)
    logits = np.asarray(llm.scores[: len(ids)], dtype=np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
