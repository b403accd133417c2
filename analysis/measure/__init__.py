"""Measurement over texts: what a text is counted into (`corpus_counts`), the metric registry and its one formula
(`metrics`), Rényi efficiency (`renyi`), the tokenizer × language grid with its cache (`grid`) and the summaries
across languages (`summaries`).

Imports the core, tokenizer and texts tiers only."""
