"""The tokenizer object (`tokenizer`, with the document checks in `document`, the byte-level alphabet in
`alphabets` and the per-process shared Rust tokenizers in `shared`), its loaders (`sources` the entry; `folders`,
`hub`, `gguf_source` by source kind; `converters` for SentencePiece, tiktoken and slow files), its exporters
(`export`, the one zip writer; `gguf_export`), the vocabulary table and the embedded default tokenizer
(`defaults`).

Imports only `analysis.core` (and `analysis.errors`)."""
