"""Tokenizer Lab's analysis engine: plain Python, no Streamlit.

Usable from a notebook (`from analysis import load`) and from the command line (`python -m analysis …`).

The engine is layered in tiers (folders), each importing only the tiers before it: `core` (knows no tokenizer),
`tokenizer`, `texts`, `measure`, `bpe`, `model` (checkpoints), `adapt` (a model adapted to a new vocabulary),
`evaluate` (an edited model or an export measured), `methods` (one package per paper method), `views`, `jobs`,
`commands`; this package is the face (`load`, the errors, `python -m analysis`). tests/test_architecture.py
holds the rules; docs/architecture.md is the map.

Which page (pages/*.py) calls which engine modules:

=====================  ===============================================================================
Home                   tokenizer.defaults (the embedded default's name), core.references
References             core.references
Load & inspect         tokenizer.sources (incl. GGUF), tokenizer.tokenizer (TokenizerSummary), tokenizer.vocab_table,
                       views.vocab_views (search), views.playground (pre_tokens)
Playground             views.playground
Merge trees            bpe (replay, merge trees, vocabulary structure, STT), views.vocab_views
Token health           bpe.stt (STT), views.vocab_views (STT table), texts.flores
Under-trained tokens   methods.undertrained, model.source, model.models (placement), model.demo_models
Compression            measure.metrics (the metric registry), measure.grid, measure.summaries (worst_languages,
                       to_latex), texts.flores, bpe.parity
Extend                 methods.extension (Preview, ExtendResult, model export), bpe.training, texts.corpora, jobs,
                       evaluate (model check, export check), adapt (initialisations, warm-up)
Prune                  methods.pruning (the order registry, PruneReport), jobs, methods.undertrained (score order)
Token reuse (R-BPE)    methods.reuse (reuse, measures, model)
Dynamic tokenization   methods.dynamic (merging, report, model), texts.flores
Source-attributed BPE  methods.sabpe (sabpe, measures, report), texts.code, bpe.parity, jobs, tokenizer.export
=====================  ===============================================================================
"""

from analysis.tokenizer.folders import load_folder
from analysis.tokenizer.hub import load_hub
from analysis.tokenizer.sources import load, load_upload
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
