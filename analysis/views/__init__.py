"""Read-only views over loaded tokenizers: vocabulary diff, id decoding, chat templates and the example gallery."""
