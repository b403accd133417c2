"""Colours and marker symbols for charts that compare tokenizers: one qualitative, colour-blind-safe palette
(Okabe & Ito), in an order where the first colours are far apart (blue, orange, green, vermillion…), and a marker
symbol per tokenizer as a second cue."""

from __future__ import annotations

#: Okabe–Ito, "Color Universal Design" (2008): distinguishable with every common colour-vision deficiency; its
#: black is a mid grey here, which shows on Streamlit's dark theme as well as on the light one.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#999999", "#F0E442"]
SYMBOLS = ["circle", "diamond", "square", "triangle-up", "cross", "triangle-down", "x", "star"]


def tokenizer_colours(names: list[str]) -> dict[str, str]:
    """A colour per tokenizer, in the order given (the same on every chart of a page)."""
    return {n: OKABE_ITO[i % len(OKABE_ITO)] for i, n in enumerate(names)}


def tokenizer_symbols(names: list[str]) -> dict[str, str]:
    """A marker symbol per tokenizer, in the order given."""
    return {n: SYMBOLS[i % len(SYMBOLS)] for i, n in enumerate(names)}
