"""`python -m analysis chat-template TOKENIZER [--messages FILE] [--no-generation-prompt] [--json]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.core.inputs import parse_json, read_file
from analysis.views.chat_template import SAMPLE_CONVERSATION, render_conversation
from analysis.views.template_worker import OUTPUT_LIMIT_CHARS

from ._common import add_tokenizer_argument, load_from_args, print_json

NAME = "chat-template"
#: Largest messages file: a conversation may hold as many characters as a rendering (UTF-8, JSON escapes).
MESSAGES_FILE_BYTES = 8 * OUTPUT_LIMIT_CHARS
HELP = "render a conversation through the tokenizer's chat template; print the text and its ids"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `chat-template`."""
    add_tokenizer_argument(p)
    p.add_argument("--messages", type=Path, default=None,
                   help='a JSON file: [{"role": "user", "content": "…"}, …] (default: a sample conversation)')  # fmt: skip
    p.add_argument("--template", default=None, help="the name of one of several templates")
    p.add_argument(
        "--no-generation-prompt", action="store_true", help="do not end with the assistant's prompt"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Render and encode (:func:`analysis.views.chat_template.render_conversation`)."""
    messages = SAMPLE_CONVERSATION
    if args.messages is not None:
        data = read_file(args.messages, cap=MESSAGES_FILE_BYTES, what="a messages file")
        messages = parse_json(data, f"the messages file {args.messages.name}")
    out, note = render_conversation(load_from_args(args), messages, template=args.template,
                                    add_generation_prompt=not args.no_generation_prompt)  # fmt: skip
    if args.json:
        print_json({**out.to_json(), **({"note": note} if note else {})})
        return 0
    if note:
        print(f"note: {note}\n")
    print(out.text)
    print(f"\n{len(out.ids)} tokens, {out.n_special} special; ids: {' '.join(map(str, out.ids))}")
    return 0
