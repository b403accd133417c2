"""Core: what every tier uses and that knows no tokenizer — paths and the allowed roots, the disk/memory cache,
progress, atomic outputs, the one bounded input reader, Unicode scripts, paper references, and the pause of the
cyclic garbage collector that every bulk builder uses.

Imports nothing from the other tiers (only `analysis.errors`)."""
