"""A conversation rendered through a tokenizer's chat template, with its special tokens located and its ids.

The template is the tokenizer's own (`chat_template` in tokenizer_config.json, or the `chat_template.jinja`
file that `analysis.tokenizer.sources` reads into the config). It is rendered in Jinja2's immutable sandbox, in a
separate process under limits on time, output and memory (:mod:`analysis.views.template_sandbox`), with the
variables and helpers Hugging Face transformers provides (`messages`, `add_generation_prompt`, `bos_token`,
`eos_token`, `raise_exception`, `strftime_now`, `tojson`), then encoded without adding special tokens, as
`apply_chat_template(..., tokenize=True)` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .template_sandbox import render_template
from .template_worker import OUTPUT_LIMIT_CHARS

#: A sample conversation (system, user, assistant, user) to start from.
SAMPLE_CONVERSATION: list[dict[str, str]] = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "What is a tokenizer?"},
    {"role": "assistant", "content": "It splits text into the units a model reads."},
    {"role": "user", "content": "Tere hommikust! Translate that."},
]
ROLES = ("system", "user", "assistant", "tool")


def chat_templates(tok: LoadedTokenizer) -> dict[str, str]:
    """The tokenizer's chat templates, name → Jinja source ("default" for a single one); {} when it has none."""
    raw = tok.config.get("chat_template")
    if isinstance(raw, str) and raw.strip():
        return {"default": raw}
    if isinstance(raw, list):  # [{"name": …, "template": …}, …]
        out = {}
        for item in raw:
            if isinstance(item, dict) and isinstance(item.get("template"), str):
                out[str(item.get("name") or f"template {len(out) + 1}")] = item["template"]
        return out
    return {}


def _special_text(value: Any) -> str:
    """A `bos_token` / `eos_token` config entry as text (a string or an AddedToken-like dict)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def check_messages(messages: Any) -> list[dict[str, str]]:
    """Messages as a list of {"role", "content"} string dicts (DataError naming the first bad one, or when they hold
    more characters than a rendering may)."""
    if not isinstance(messages, list) or not messages:
        raise DataError("a conversation is a non-empty list of messages")
    out = []
    for k, m in enumerate(messages, 1):
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("role"), str)
            or not isinstance(m.get("content"), str)
        ):
            raise DataError(f'message {k} needs a "role" and a "content", both text')
        out.append({"role": m["role"], "content": m["content"]})
    size = sum(len(m["role"]) + len(m["content"]) for m in out)
    if size > OUTPUT_LIMIT_CHARS:
        raise DataError(
            f"the conversation is {size:,} characters long, over the {OUTPUT_LIMIT_CHARS:,} a chat template may render"
        )
    return out


@dataclass(frozen=True)
class TemplateToken:
    """One token of the rendered conversation: id, raw string, text span and whether it is a special token."""

    id: int
    token: str
    start: int
    end: int
    special: bool

    def to_json(self) -> dict[str, Any]:
        """The token as a JSON object."""
        return {
            "id": self.id,
            "token": self.token,
            "start": self.start,
            "end": self.end,
            "special": self.special,
        }


@dataclass
class RenderedChat:
    """A conversation rendered through a chat template: the text, its tokens and ids."""

    template_name: str
    text: str
    tokens: list[TemplateToken]
    add_generation_prompt: bool

    @property
    def ids(self) -> list[int]:
        """The token ids of the rendered text."""
        return [t.id for t in self.tokens]

    @property
    def n_special(self) -> int:
        """How many of the tokens are special tokens."""
        return sum(t.special for t in self.tokens)

    def to_json(self) -> dict[str, Any]:
        """The rendering as one JSON object."""
        return {
            "template": self.template_name,
            "text": self.text,
            "add_generation_prompt": self.add_generation_prompt,
            "ids": self.ids,
            "n_special": self.n_special,
            "tokens": [t.to_json() for t in self.tokens],
        }


def render_chat(
    tok: LoadedTokenizer,
    messages: list[dict[str, str]],
    *,
    template: str | None = None,
    add_generation_prompt: bool = True,
) -> RenderedChat:
    """Render `messages` through the tokenizer's chat template (`template` names one of several) and encode it.

    DataError when the tokenizer has no chat template or the template fails (its own `raise_exception` message
    included, e.g. roles that must alternate) or passes a limit (time, output, memory: see
    :mod:`analysis.views.template_worker`).
    """
    messages = check_messages(messages)
    templates = chat_templates(tok)
    if not templates:
        raise DataError(
            f"{tok.name} has no chat template (no chat_template in tokenizer_config.json, no chat_template.jinja)"
        )
    name = template or next(iter(templates))
    if name not in templates:
        raise DataError(f"{tok.name} has no chat template named {name!r} (it has {', '.join(templates)})")
    context = {
        "messages": messages,
        "add_generation_prompt": add_generation_prompt,
        "bos_token": _special_text(tok.config.get("bos_token")),
        "eos_token": _special_text(tok.config.get("eos_token")),
        "tools": None,
        "documents": None,
    }
    text = render_template(templates[name], context, what=f"the chat template of {tok.name}")
    enc = tok.tokenizer.encode(text, add_special_tokens=False)
    specials = {a.id for a in tok.special_tokens}
    tokens = [
        TemplateToken(i, t, s, e, i in specials) for i, t, (s, e) in zip(enc.ids, enc.tokens, enc.offsets)
    ]
    return RenderedChat(
        template_name=name, text=text, tokens=tokens, add_generation_prompt=add_generation_prompt
    )


def render_conversation(
    tok: LoadedTokenizer,
    messages: list[dict[str, str]] = SAMPLE_CONVERSATION,
    *,
    template: str | None = None,
    add_generation_prompt: bool = True,
) -> tuple[RenderedChat, str]:
    """:func:`render_chat`, and a note ("" when none).

    Some templates refuse a system message (Gemma's raises "System role not supported"): the untouched
    :data:`SAMPLE_CONVERSATION` is then rendered without it and the note says so, instead of a first view that is
    an error. A conversation the user wrote, or a template that fails either way, raises the template's error."""
    try:
        return render_chat(tok, messages, template=template, add_generation_prompt=add_generation_prompt), ""
    except DataError as first:
        if messages != SAMPLE_CONVERSATION:
            raise
        bare = [m for m in SAMPLE_CONVERSATION if m["role"] != "system"]
        try:
            out = render_chat(tok, bare, template=template, add_generation_prompt=add_generation_prompt)
        except DataError:
            raise first from None
        return out, (
            f"The template of {tok.name} refuses the sample's system message ({str(first).split(': ', 1)[-1]}): "
            "the sample is rendered without it."
        )
