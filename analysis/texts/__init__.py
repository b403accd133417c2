"""Every text the engine reads: FLORES-200 (`flores`), user corpora (`corpora`), corpus shards for jobs
(`shards`).

Imports `analysis.core` and `analysis.tokenizer.tokenizer` only."""
