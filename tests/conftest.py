"""Generic fixtures for every test. Helpers (paths, example tokenizers, FLORES lines) live in tests/support.py;
the real-browser fixtures live in tests/e2e/conftest.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support import load_shared

from analysis import LoadedTokenizer


@pytest.fixture(scope="session")
def shared_tokenizer() -> Callable[[str], LoadedTokenizer]:
    """A function name → LoadedTokenizer for the shared assets (cached for the session)."""
    return load_shared
