"""Dynamic tokenization: merging sampled per-text merges and FVT rows for a model (`dynamic`)."""
