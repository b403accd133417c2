"""Views over loaded tokenizers: vocabulary search views (`vocab_views`), the playground (`playground`), the
vocabulary diff (`vocab_diff`), id decoding (`decode`), chat templates (`chat_template`), texts kept for long links
(`shared_text`), switched-off runtime settings (`runtime`) and the example gallery (`gallery`).

Imports the engine tiers below; no paper method."""
