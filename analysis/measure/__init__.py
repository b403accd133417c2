"""Measurement: the compression metrics (`metrics`) computed per language over texts.

Imports the core, tokenizer and texts tiers only."""
