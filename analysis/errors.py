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
