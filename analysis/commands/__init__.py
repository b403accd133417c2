"""Sub-commands of `python -m analysis` (one module each)."""
