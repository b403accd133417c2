"""Measurement over texts: what a text is counted into (`corpus_counts`), the metric registry and its one formula
(`metrics`), Rényi efficiency (`renyi`), the tokenizer × language grid with its cache (`grid`) and the summaries
across languages (`summaries`); every bulk encode goes through `fast_encode` (gigatoken where verified identical to
tokenizers, else tokenizers).

Imports the core, tokenizer and texts tiers only."""
