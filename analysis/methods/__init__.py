"""One package per paper method, each with the same skeleton: `__init__.py` (public API), algorithm module(s),
`report.py` (the typed result and its JSON), `model.py` (where the model follows the ids).

A method imports the engine tiers below it and no other method, except the compositions declared in
tests/test_architecture.py (prune-then-extend)."""
