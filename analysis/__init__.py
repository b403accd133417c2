"""Tokenizer Lab's analysis engine: plain Python, no Streamlit.

Usable from a notebook (`from analysis import load`) and from the command line (`python -m analysis …`).
"""

from .errors import AnalysisError, DataError, ModelLoadError, TokenizerLoadError, UnsupportedTokenizerError
from .sources import load, load_folder, load_hub, load_upload
from .tokenizer import LoadedTokenizer

__all__ = [
    "AnalysisError",
    "DataError",
    "LoadedTokenizer",
    "ModelLoadError",
    "TokenizerLoadError",
    "UnsupportedTokenizerError",
    "load",
    "load_folder",
    "load_hub",
    "load_upload",
]
