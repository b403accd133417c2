"""Token reuse (R-BPE): classify vocabulary tokens, choose the reusable ones and refill them with target-language
tokens (`reuse`), measure it (`measures`), and let the model follow the ids (`model`)."""
