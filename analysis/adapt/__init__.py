"""Adapting a model to a new vocabulary: the id map between the original and the edited vocabulary
(:mod:`.vocab_map`), the new embedding rows (:mod:`.embeddings` with FVT, :mod:`.fvt`, and OMP, :mod:`.omp`) and the
warm-up that trains only those rows (:mod:`.warmup`).

Imports the tiers up to :mod:`analysis.model` (checkpoints); never :mod:`analysis.evaluate` nor a paper method."""
