"""One registry of pruning orders (analysis.methods.pruning.orders.ORDER_REGISTRY): the CLI's `--order` choices, the
Prune page's list and compute_order read it, so they can never differ (the page's list is checked in
tests/app/test_prune_page.py::test_page_offers_exactly_the_registry)."""

from __future__ import annotations

import argparse

import pytest
from support import load_shared

from analysis.cli import build_parser
from analysis.errors import DataError
from analysis.methods import pruning as P


def _cli_order_choices() -> tuple[str, ...]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    order = next(a for a in sub.choices["prune"]._actions if a.dest == "order")
    return tuple(order.choices)


def test_cli_offers_exactly_the_registry():
    assert _cli_order_choices() == P.ORDERS == tuple(P.ORDER_REGISTRY)
    assert len(P.ORDERS) >= 7


def test_derived_lists_follow_the_registry():
    """The structure-safe and corpus lists are properties of the registry entries, not hand copies."""
    assert set(P.STRUCTURE_SAFE_ORDERS) == {n for n, o in P.ORDER_REGISTRY.items() if o.structure_safe}
    assert P.CORPUS_ORDERS == ("frequency", "leaf-frequency", "merge-based")
    assert {P.ORDER_REGISTRY[n].corpus[0] for n in P.CORPUS_ORDERS} == {"token-ids", "merge-counts"}
    assert set(P.ORDER_DESCRIPTIONS) == set(P.ORDER_LABELS) == set(P.ORDERS)


def test_every_registered_order_builds_and_unknown_ones_are_refused():
    tok = load_shared("gpt2")
    texts = ["Hello world, hello tokenizers.", "Pruning orders come from one registry."]
    for name in P.ORDERS:
        scores = {i: float(i) for i in tok.vocab.values()} if name == "score" else None
        order = P.compute_order(tok, name, texts, scores=scores)
        assert order.method == name and len(order) > 0
    with pytest.raises(DataError, match="unknown pruning order 'nope'"):
        P.compute_order(tok, "nope", texts)
