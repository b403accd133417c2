"""Evaluating an edited model or an export: the model check (:mod:`.model_check`, with the per-language comparison
against the original model in :mod:`.comparison`), the pre-flight checks of an exported folder (:mod:`.preflight`),
tokenization parity with llama.cpp (:mod:`.parity`) and the export check that runs them on an export
(:mod:`.export_check`).

Imports the tiers up to :mod:`analysis.adapt`; never a paper method."""
