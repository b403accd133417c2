"""What the browser says when it loses the server: Tokenizer Lab's words in Streamlit's "Connection error" dialog.

Streamlit's front end words that dialog for a Streamlit developer: on `localhost` it suggests
`streamlit run yourscript.py`, and on any other address (this app's `http://127.0.0.1:8501` included) it asks
"Are you connected to the internet?" — after a crash or a stopped server, that blames the user's network.
Streamlit has no setting for the text (neither `config.toml`'s `[client]` nor the theme), so the frame adds one
small script (:func:`reconnect_note`) that rewrites the dialog's text as it appears: the server is not answering,
how to start it again, and that the page reconnects by itself. The strings it looks for are Streamlit's own
(:data:`STREAMLIT_TEXTS`); tests/app/test_frame_pages.py checks that the installed Streamlit still has them.
"""

from __future__ import annotations

import streamlit as st

from analysis.core.outputs import json_document

#: Streamlit's texts in the dialog (its front-end bundle) → Tokenizer Lab's.
STREAMLIT_TEXTS: dict[str, str] = {
    "Streamlit server is not responding. Are you connected to the internet?": (
        "The Tokenizer Lab server is not answering: it has stopped, crashed or is restarting (its terminal says "
        "which). Start it again with `bash scripts/start.sh`; this page reconnects by itself when it is back."
    ),
    "Is Streamlit still running? If you accidentally stopped Streamlit, just restart it in your terminal:": (
        "The Tokenizer Lab server is not answering: it has stopped, crashed or is restarting (its terminal says "
        "which). Start it again in a terminal (this page reconnects by itself when it is back):"
    ),
    "streamlit run yourscript.py": "bash scripts/start.sh",
}

_SCRIPT = """<script>
(() => {
  if (window.__toklabReconnect) return;
  window.__toklabReconnect = true;
  const texts = %s;
  const fix = (root) => {
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      for (const [from, to] of Object.entries(texts)) {
        if (n.nodeValue.includes(from)) n.nodeValue = n.nodeValue.replace(from, to);
      }
    }
  };
  new MutationObserver((changes) => {
    for (const c of changes) for (const node of c.addedNodes) {
      if (node.nodeType === Node.ELEMENT_NODE && node.closest('[role="dialog"]') !== null) fix(node);
      else if (node.nodeType === Node.ELEMENT_NODE && node.querySelector('[role="dialog"]')) fix(node);
    }
  }).observe(document.body, {childList: true, subtree: true});
})();
</script>"""


def reconnect_note() -> None:
    """Add the script that rewords Streamlit's connection-error dialog (once per browser page; it draws nothing)."""
    st.html(_SCRIPT % json_document(STREAMLIT_TEXTS), unsafe_allow_javascript=True)  # a JSON object is JS
