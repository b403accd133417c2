"""Exceptions the library raises for bad input; the app shows their message, never a traceback."""


class AnalysisError(Exception):
    """Base class: a problem with the user's input that has a clear, human-readable message."""


class TokenizerLoadError(AnalysisError):
    """A tokenizer could not be loaded (missing files, corrupt JSON, unsupported format, hub failure)."""


class UnsupportedTokenizerError(AnalysisError):
    """The feature does not apply to this tokenizer (e.g. a WordPiece model on a BPE-only feature)."""


class DataError(AnalysisError):
    """Input data is unusable (empty corpus, unknown language code, unreadable file)."""


class ModelLoadError(AnalysisError):
    """Model weights could not be read (no embeddings, no LM head, unsafe or corrupt file)."""


def is_rust_panic(e: BaseException) -> bool:
    """True for the `pyo3_runtime.PanicException` a Rust library (tokenizers, safetensors) raises when it panics.

    It derives from `BaseException`, so `except Exception` does not catch it; callers that build Rust objects from
    user data catch `BaseException`, turn a panic into an `AnalysisError` and re-raise everything else.
    """
    t = type(e)
    return t.__name__ == "PanicException" and t.__module__ == "pyo3_runtime"
