"""stored_order: the pruning order read back from the disk store is the order compute_order gives, the key holds
every input (another text mix is computed, not read back), and a malformed stored file is computed again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import flores_lines, load_shared

from analysis.core.cache import clear_memory
from analysis.methods import pruning as P
from analysis.methods.pruning import orders, stored


def _recomputed(*args, **kwargs):
    raise AssertionError("recomputed although the disk store holds the order")


def test_stored_order_is_read_back_and_keyed_by_its_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    clear_memory()
    tok = load_shared("llama-2")
    texts = flores_lines("est_Latn", 300)
    first = P.stored_order(tok, "leaf-frequency", texts)
    ref = P.compute_order(tok, "leaf-frequency", texts)
    assert first.ids == ref.ids and dict(first.keys) == dict(ref.keys)

    clear_memory()
    with monkeypatch.context() as m:
        m.setattr(orders, "compute_order", _recomputed)
        again = P.stored_order(tok, "leaf-frequency", texts)
        assert again.ids == ref.ids and dict(again.keys) == dict(ref.keys)
        assert again.tokenizer_hash == tok.content_hash
        with pytest.raises(AssertionError, match="recomputed"):  # another text mix: another key
            P.stored_order(tok, "leaf-frequency", texts[:-1])
        with pytest.raises(AssertionError, match="recomputed"):  # another method: another key
            P.stored_order(tok, "leaf-last-n", None)

    key = P.order_key(tok, "leaf-frequency", texts)
    stored = tmp_path / "store" / "prune-order" / f"{key}.json"
    assert stored.is_file()
    stored.write_text('{"version": "1", "data": {"method": "leaf-frequency", "ids": "not a list"}}')
    clear_memory()
    assert P.stored_order(tok, "leaf-frequency", texts).ids == ref.ids


def test_an_order_read_or_computed_once_is_kept_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A second page view reads neither the disk nor the merge graph: the order is kept in memory."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    clear_memory()
    tok = load_shared("llama-2")
    computed = P.stored_order(tok, "leaf-last-n", None)
    clear_memory()
    read = P.stored_order(tok, "leaf-last-n", None)  # from disk
    assert read.ids == computed.ids
    with monkeypatch.context() as m:
        m.setattr(orders, "compute_order", _recomputed)
        m.setattr(stored._STORE, "get", lambda key: pytest.fail("read the disk again"))
        assert P.stored_order(tok, "leaf-last-n", None) is read
    clear_memory()
    with monkeypatch.context() as m:  # a miss is not remembered: the disk is read again
        m.setattr(stored._STORE, "get", lambda key: None)
        again = P.stored_order(tok, "leaf-last-n", None)
        assert again.ids == computed.ids and again is not read


def test_order_key_separates_scores_and_scripts():
    tok = load_shared("llama-2")
    a = P.order_key(tok, "score", scores=np.zeros(10))
    b = P.order_key(tok, "score", scores=np.ones(10))
    c = P.order_key(tok, "script", allowed_scripts=("Latin",))
    d = P.order_key(tok, "script", allowed_scripts=("Latin", "Greek"))
    assert len({a, b, c, d}) == 4
    assert a == P.order_key(tok, "score", scores=np.zeros(10))
