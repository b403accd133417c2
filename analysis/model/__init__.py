"""The model side: weights (safetensors / GGUF), model loading, embeddings export, FVT initialisation, demo
models.

Imports the core, tokenizer, texts, measure and bpe tiers; never a paper method."""
