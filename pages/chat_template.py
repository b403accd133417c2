"""Chat template: a conversation rendered through a tokenizer's own template, special tokens shown, with ids."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.views.chat_template import ROLES, SAMPLE_CONVERSATION, chat_templates, render_conversation
from ui.errors import try_step
from ui.pickers import pick_tokenizer
from ui.spans import token_spans_html
from ui.workspace import keep, unless_kept

#: The page inputs kept in the workspace.
KEPT = ("ct-tok", "ct-gen")


def conversation_editor() -> list[dict[str, str]]:
    """The conversation as an editable table (role, content); rows can be added and removed."""
    st.session_state.setdefault("ct-messages", pd.DataFrame(SAMPLE_CONVERSATION))
    frame = st.data_editor(
        st.session_state["ct-messages"],
        num_rows="dynamic",
        width="stretch",
        key="ct-editor",
        column_config={
            "role": st.column_config.SelectboxColumn(
                "Role", options=list(ROLES), required=True, width="small"
            ),
            "content": st.column_config.TextColumn("Content", required=True, width="large"),
        },
    )
    return [{"role": str(r["role"]), "content": str(r["content"])} for r in frame.to_dict("records")
            if isinstance(r.get("role"), str) and isinstance(r.get("content"), str)]  # fmt: skip


def page() -> None:
    """Tokenizer and conversation → one engine call → the rendered text as tokens, and its ids."""
    st.title("Chat template")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption("The conversation as the model sees it: rendered through the tokenizer's own chat template "
               "(`chat_template` in tokenizer_config.json or `chat_template.jinja`), then encoded.")  # fmt: skip
    tok = pick_tokenizer("Tokenizer", key="ct-tok")
    if tok is None:
        return
    templates = chat_templates(tok)
    if not templates:
        st.info(f"**{tok.name}** has no chat template. Try an instruct tokenizer: llama-3.1, qwen3, "
                "smollm2-135m-instruct or mistral-7b-v0.3 (add them from the sidebar).")  # fmt: skip
        return
    c1, c2 = st.columns([2, 1])
    name = c1.selectbox("Template", list(templates), key="ct-template") if len(templates) > 1 else None
    gen = c2.toggle("Add the generation prompt", value=unless_kept("ct-gen", True, False), key="ct-gen",
                    help="End with the assistant's turn opening, as when asking the model to answer.")  # fmt: skip
    messages = conversation_editor()
    if not messages:
        st.info("Add a message.")
        return
    done = try_step(render_conversation, tok, messages, template=name, add_generation_prompt=gen)
    if done is None:
        return
    out, note = done
    if note:
        st.info(note + " Edit the conversation to try others.")
    st.markdown(f"**{len(out.ids):,} tokens**, {out.n_special} of them special (dark)")
    st.html(token_spans_html(tok, out.text, out.ids, [(t.start, t.end) for t in out.tokens],
                             show_whitespace=True))  # fmt: skip
    st.code(" ".join(map(str, out.ids)), language=None, wrap_lines=True)
    with st.expander("Rendered text and template source"):
        st.code(out.text, language=None, wrap_lines=True)
        st.code(templates[out.template_name], language="jinja2", wrap_lines=True)


page()
