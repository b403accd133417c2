"""Tokenizer Lab's analysis engine: plain Python, no Streamlit.

Usable from a notebook (`from analysis import load`) and from the command line (`python -m analysis …`).

Which page (pages/*.py) calls which engine modules:

=====================  ===============================================================================
Home                   defaults (the embedded default's name), references
References             references
Load & inspect         sources (incl. GGUF), tokenizer (TokenizerSummary), vocab_table, vocab_views (search), playground (pre_tokens)
Playground             playground
Merge trees            bpe (replay, merge trees, vocabulary structure, STT), vocab_views
Token health           bpe.stt (STT), vocab_views (STT table), flores
Under-trained tokens   undertrained, weights, models (placement), demo_models (fetch button of the model picker)
Compression            metrics (incl. worst_languages, to_latex longtable), flores, parity (parity-aware vs plain BPE)
Extend                 extension (Preview, ExtendResult, model export), training, corpora, distributed, flores
Prune                  pruning, prune_export (PruneReport, folder, zip), distributed, undertrained (score order)
Token reuse (R-BPE)    reuse, reuse_measures (measures, collateral), reuse_model (FVT rows)
Dynamic tokenization   dynamic (merging, sampled merge counts, FVT rows for a model), flores
Source-attributed BPE  sabpe (SabpeComparison), parity, distributed, export
=====================  ===============================================================================
"""

from analysis.tokenizer.sources import load, load_folder, load_hub, load_upload
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .errors import AnalysisError, DataError, ModelLoadError, TokenizerLoadError, UnsupportedTokenizerError

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
