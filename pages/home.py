"""Home: what Tokenizer Lab is, what each group of pages answers, and three journeys one click away."""

from __future__ import annotations

import streamlit as st

from analysis.core.references import reference
from analysis.tokenizer.defaults import DEFAULT_NAME
from ui.loaders import example_tokenizers

INTRO = (
    "**Tokenizer Lab** is a workbench for the tokenizers of language models. Load any Hugging Face tokenizer "
    "(or use the embedded default, {default}), look inside it, find tokens the merges can never build or the "
    "model never learned, measure how well it encodes all 204 FLORES-200 languages, and change it — add tokens "
    "by continued BPE training, prune without breaking merges, reuse the ids of unused scripts — with a live "
    "before/after preview and an export that loads with `AutoTokenizer`. Every number comes from a plain-Python "
    "library (`analysis/`) that the command line `python -m analysis` shares with the app; the methods follow "
    "published papers, listed on the References page."
)

#: (group, the question it answers, [(page file, title)])
GROUPS = [
    (
        "Look inside",
        "What is in this tokenizer, and how does it split my text?",
        [
            ("pages/inspect.py", "Load & inspect"),
            ("pages/playground.py", "Playground"),
            ("pages/merge_trees.py", "Merge trees"),
            ("pages/vocab_diff.py", "Vocabulary diff"),
            ("pages/chat_template.py", "Chat template"),
            ("pages/drift.py", "Drift"),
        ],
    ),  # fmt: skip
    (
        "Diagnose",
        "Which tokens can no input ever produce, and which did the model never learn?",
        [("pages/token_health.py", "Token health"), ("pages/undertrained.py", "Under-trained tokens")],
    ),
    (
        "Measure",
        "How many bytes does a token carry in each of 204 languages, and how unequal is that?",
        [("pages/compression.py", "Compression")],
    ),
    (
        "Change",
        "How do I add, remove or reuse tokens, or swap the tokenizer, without breaking the model?",
        [
            ("pages/extend.py", "Extend"),
            ("pages/prune.py", "Prune"),
            ("pages/reuse.py", "Token reuse (R-BPE)"),
            ("pages/dynamic.py", "Dynamic tokenization"),
            ("pages/sabpe.py", "Source-attributed BPE"),
            ("pages/transplant.py", "Transplant"),
        ],
    ),  # fmt: skip
]
JOURNEY_TEXT = "Tokenizers split naïve words differently: tere hommikust, 東京, Привет!"


def source(example: str) -> tuple[str, str]:
    """A link source for an example tokenizer, or the embedded default when the example is not installed."""
    return (f"example:{example}", example) if example in example_tokenizers() else ("embedded:", DEFAULT_NAME)


def journeys() -> None:
    """Three starting points, each a link that opens its page on a real tokenizer."""
    st.subheader("Start here")
    llama_src, llama = source("llama-3.1")
    gpt2_src, gpt2 = source("gpt2")
    compare = list(dict.fromkeys(["embedded:", gpt2_src, llama_src]))
    items = [
        (
            "Compare tokenizers on your text",
            f"{DEFAULT_NAME}, {gpt2} and {llama} side by side on one sentence: token boundaries, ids and counts. "
            "Then type your own text.",
            "pages/playground.py",
            {"t": compare, "text": JOURNEY_TEXT},
            "Open the Playground",
        ),
        (
            "Is my tokenizer healthy?",
            f"The Self-Tokenization Test on {llama}: which vocabulary tokens the merges can never build "
            "(Llama-3.1 has 588, reachable only by merge skipping), why, and their merge trees.",
            "pages/token_health.py",
            {"t": llama_src},
            "Open Token health",
        ),
        (
            "Adapt a tokenizer to a language",
            f"Extend {llama} with 1,000 Estonian tokens by continued BPE training "
            f"({reference('continued-bpe').short}), see bytes per token before and after, export it.",
            "pages/extend.py",
            {"t": llama_src},
            "Open Extend",
        ),
    ]
    for col, (title, text, page, params, label) in zip(st.columns(3), items):
        with col.container(border=True, height="stretch"):
            st.markdown(f"**{title}**")
            st.caption(text)
            st.page_link(page, label=label, icon=":material/arrow_forward:", query_params=params)


def groups() -> None:
    """What each group of pages answers, with its pages."""
    st.subheader("What each group answers")
    for col, (group, question, pages) in zip(st.columns(len(GROUPS)), GROUPS):
        with col.container(border=True, height="stretch"):
            st.markdown(f"**{group}**")
            st.caption(question)
            for path, title in pages:
                st.page_link(path, label=title)


def page() -> None:
    """Intro, journeys, groups, where the tokenizers and papers are."""
    st.title("Tokenizer Lab")
    st.markdown(INTRO.format(default=DEFAULT_NAME))
    st.page_link("pages/gallery.py", label="A first look: every example tokenizer on 204 languages, precomputed",
                 icon=":material/photo_library:")  # fmt: skip
    journeys()
    groups()
    st.caption(
        "Your tokenizers are in the library on the left: add an example there or load your own on "
        "*Load & inspect*. The papers behind every method are on the References page."
    )
    st.page_link("pages/references.py", label="References", icon=":material/menu_book:")


page()
