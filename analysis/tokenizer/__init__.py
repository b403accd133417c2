"""The tokenizer object (`tokenizer`), its loaders and converters (`sources`, GGUF included), its exporters
(`export`, the one zip writer), the vocabulary table and the embedded default tokenizer (`defaults`).

Imports only `analysis.core` (and `analysis.errors`)."""
