"""Checkpoints: reading and writing model weights (safetensors / GGUF), loading a causal LM and placing it on a
device, running it over text (log-probs and bits per byte, :mod:`.bpb`), the JSON files a saved checkpoint carries,
llama.cpp, the demo models.

Imports the core, tokenizer, texts, measure and bpe tiers; never a paper method. Adapting a model to a new
vocabulary is :mod:`analysis.adapt`, evaluating an edited model or an export :mod:`analysis.evaluate`."""
