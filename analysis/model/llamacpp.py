"""llama.cpp itself, through `llama-cpp-python`: load a GGUF (vocabulary only, or with its weights), tokenize with
llama.cpp's own tokenizer, and read next-token log-probabilities.

`llama-cpp-python` is built from its PyPI source distribution (scripts/venv.sh passes the CMake flags); where it
is missing, :func:`require_llama_cpp` raises ModelLoadError with what to install, and the export check reports the
parity part as blocked instead of failing.
"""

from __future__ import annotations

import os
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


def require_llama_cpp() -> Any:
    """The `llama_cpp` module, or ModelLoadError saying how to get it."""
    try:
        import llama_cpp  # noqa: PLC0415 - optional and heavy, loaded on use
    except (ImportError, OSError) as e:  # OSError: the shared library failed to load
        raise ModelLoadError(
            "llama-cpp-python is not installed (pip install llama-cpp-python==0.3.36; it builds llama.cpp from "
            f"source, see docs/model-check.md 'Export'): {e}"
        ) from e
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
