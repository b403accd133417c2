"""A first-view chart: drawn with the page as static SVG (`ui/svg.py`), its interactive Plotly version behind one
toggle. A Plotly chart needs Plotly's front-end module (4.7 MB of JavaScript, 1.0–1.4 s to load and compile in a new
browser on two cores) before it draws anything, so no page's first view holds one; the Example gallery, Load &
inspect, Token health, Token reuse and Dynamic tokenization use this pair."""

from __future__ import annotations

from typing import Any

import streamlit as st

#: What the toggle brings, in its tooltip.
PLOTLY_HELP = "Plotly: zoom, pan, hover, save as PNG"


def interactive_toggle(key: str, *, charts: int = 1, container: Any = st) -> bool:
    """The "Interactive chart(s)" toggle (widget `key`) in `container`: True when the page should draw the Plotly
    version of its `charts` static charts instead."""
    label = "Interactive chart" if charts == 1 else "Interactive charts"
    return bool(container.toggle(label, key=key, help=PLOTLY_HELP))


def show_svg(svg: str, *, heading: str | None = None, container: Any = st) -> None:
    """Draw a static chart of `ui/svg.py` with the page in `container`, under a bold `heading` when given.
    Through `st.markdown`: `st.html`'s sanitiser keeps HTML only and drops every SVG."""
    if heading:
        container.markdown(f"**{heading}**")
    container.markdown(svg, unsafe_allow_html=True)
