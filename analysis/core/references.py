"""The papers Tokenizer Lab implements or measures with, cited by authors, title, venue and year.

One list for the app's References page, the README and the pages' short citations (:func:`cite`). Every method
in the engine that follows a paper names its key here in its docstring.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    """One publication: `key` is the short name the app uses (e.g. ``continued-bpe``)."""

    key: str
    authors: str
    title: str
    venue: str
    year: int
    url: str
    used_for: str

    @property
    def short(self) -> str:
        """Authors' surnames and year, e.g. "Purason et al. (2026)"."""
        names = [
            a.strip().split(" ")[-1] for a in self.authors.replace(" and ", ", ").split(",") if a.strip()
        ]
        if self.authors.startswith("NLLB Team"):
            return f"NLLB Team ({self.year})"
        if len(names) == 1:
            who = names[0]
        elif len(names) == 2:
            who = f"{names[0]} & {names[1]}"
        else:
            who = f"{names[0]} et al."
        return f"{who} ({self.year})"

    @property
    def full(self) -> str:
        """The full citation: authors, title, venue, year."""
        return f"{self.authors.rstrip('.')}. *{self.title}*. {self.venue}, {self.year}."

    def bibtex(self) -> str:
        """A BibTeX entry (``@inproceedings`` for proceedings and Findings, ``@misc`` otherwise)."""
        kind = "inproceedings" if ("Proceedings" in self.venue or "Findings" in self.venue) else "misc"
        venue_field = "booktitle" if kind == "inproceedings" else "howpublished"
        fields = {
            "author": " and ".join(
                "others" if a.strip() == "et al." else a.strip()
                for a in self.authors.replace(" and ", ", ").split(",")
                if a.strip()
            ),
            "title": "{" + self.title + "}",
            venue_field: self.venue,
            "year": str(self.year),
        }
        if self.url:
            fields["url"] = self.url
        body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items())
        return f"@{kind}{{{self.key.replace('-', '_')},\n{body}\n}}"

    def to_json(self) -> dict[str, str | int]:
        """A JSON-ready record."""
        return {
            "key": self.key,
            "authors": self.authors,
            "title": self.title,
            "venue": self.venue,
            "year": self.year,
            "url": self.url,
            "used_for": self.used_for,
        }


REFERENCES: tuple[Reference, ...] = (
    Reference(
        "continued-bpe",
        "Taido Purason, Pavel Chizhov, Ivan P. Yamshchikov, Mark Fishel",
        "Teaching Old Tokenizers New Words: Efficient Tokenizer Adaptation for Pre-trained Models",
        "Findings of the Association for Computational Linguistics: EACL 2026",
        2026,
        "https://github.com/taidopurason/tokenizer-extension",
        "continued BPE training, naive extension, leaf-based pruning (Alg. 1) and merge-based pruning (Alg. 2), "
        "the Self-Tokenization Test, bytes per token and Rényi efficiency on FLORES-200, FVT initialisation",
    ),
    Reference(
        "r-bpe",
        "Nancy Hamdan, Osama Rakan Al Mraikhat, Fadi A. Zaraket",
        "R-BPE: Improving BPE-Tokenizers with Token Reuse",
        "Proceedings of the 2025 Conference on Empirical Methods in Natural Language Processing (EMNLP)",
        2025,
        "https://acr.ps/1L9GPmL",
        "token reuse: Unicode-block vocabulary classes, reusable ids, id maps, segment encode / window decode",
    ),
    Reference(
        "extension-thesis",
        "Jaeyoon Kim",
        "Exploring the Effects of Tokenizer Extension on Domain-specific Finetuning of Language Models",
        "MA thesis, Department of Linguistics, Seoul National University",
        2025,
        "",
        "naive extension of WordPiece, SentencePiece BPE and byte-level BPE, minimum-frequency thresholds, "
        "characters per 2,048 tokens, embedding and LM-head initialisation",
    ),
    Reference(
        "sa-bpe",
        "Pavel Chizhov, Egor Bogomolov, Ivan P. Yamshchikov",
        "From Where Words Come: Efficient Regularization of Code Tokenizers Through Source Attribution",
        "Proceedings of the 64th Annual Meeting of the Association for Computational Linguistics (ACL)",
        2026,
        "https://github.com/pchizhov/sa-bpe",
        "source-attributed BPE (priorities, merge skipping), under-trained token categories, coverage and Gini",
    ),
    Reference(
        "dynamic-tokenization",
        "Darius Feher, Ivan Vulić, Benjamin Minixhofer",
        "Retrofitting Large Language Models with Dynamic Tokenization",
        "Proceedings of the 63rd Annual Meeting of the Association for Computational Linguistics (ACL)",
        2025,
        "https://arxiv.org/abs/2411.18553",
        "batch-level merging of subwords within boundaries, sequence-length reduction against merges",
    ),
    Reference(
        "magikarp",
        "Sander Land, Max Bartolo",
        "Fishing for Magikarp: Automatically Detecting Under-trained Tokens in Large Language Models",
        "Proceedings of the 2024 Conference on Empirical Methods in Natural Language Processing (EMNLP)",
        2024,
        "https://arxiv.org/abs/2405.05417",
        "under-trained token indicators from the embedding matrices and verification prompts",
    ),
    Reference(
        "fvt",
        "Leonidas Gee, Andrea Zugarini, Leonardo Rigutini, Paolo Torroni",
        "Fast Vocabulary Transfer for Language Model Compression",
        "Proceedings of the 2022 Conference on Empirical Methods in Natural Language Processing: Industry Track",
        2022,
        "https://aclanthology.org/2022.emnlp-industry.41/",
        "FVT: a new token's embedding is the mean of its pieces' embeddings under the original tokenizer",
    ),
    Reference(
        "parity",
        "Aleksandar Petrov, Emanuele La Malfa, Philip H. S. Torr, Adel Bibi",
        "Language Model Tokenizers Introduce Unfairness Between Languages",
        "Advances in Neural Information Processing Systems 36 (NeurIPS)",
        2023,
        "https://arxiv.org/abs/2305.15425",
        "tokenization parity and premium against English on parallel sentences",
    ),
    Reference(
        "renyi",
        "Vilém Zouhar, Clara Meister, Juan Gastaldi, Li Du, Mrinmaya Sachan, Ryan Cotterell",
        "Tokenization and the Noiseless Channel",
        "Proceedings of the 61st Annual Meeting of the Association for Computational Linguistics (ACL)",
        2023,
        "https://aclanthology.org/2023.acl-long.284/",
        "Rényi efficiency of a token distribution",
    ),
    Reference(
        "continued-words",
        "Phillip Rust, Jonas Pfeiffer, Ivan Vulić, Sebastian Ruder, Iryna Gurevych",
        "How Good is Your Tokenizer? On the Monolingual Performance of Multilingual Language Models",
        "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics (ACL)",
        2021,
        "https://aclanthology.org/2021.acl-long.243/",
        "fertility and the proportion of continued words",
    ),
    Reference(
        "parity-aware-bpe",
        "Negar Foroutan, Clara Meister, Debjit Paul, Joel Niklaus, Sina Ahmadi, Antoine Bosselut, Rico Sennrich",
        "Parity-Aware Byte-Pair Encoding: Improving Cross-lingual Fairness in Tokenization",
        "arXiv preprint 2508.04796",
        2025,
        "https://arxiv.org/abs/2508.04796",
        "parity-aware BPE training (the `tokenizers` ParityBpeTrainer)",
    ),
    Reference(
        "flores",
        "NLLB Team, Marta R. Costa-jussà, James Cross, Onur Çelebi, et al.",
        "No Language Left Behind: Scaling Human-Centered Machine Translation",
        "arXiv preprint 2207.04672",
        2022,
        "https://github.com/facebookresearch/flores",
        "FLORES-200: 1,012 parallel devtest sentences in 204 languages",
    ),
)

_BY_KEY = {r.key: r for r in REFERENCES}


def reference(key: str) -> Reference:
    """The reference with this key (KeyError for an unknown key: a programming error)."""
    return _BY_KEY[key]


def markdown_list() -> str:
    """The README's References section body: one bullet per paper (full citation, link, what the app uses)."""
    lines = []
    for r in REFERENCES:
        link = f" <{r.url}>" if r.url else ""
        lines.append(f"- {r.full}{link} — *used for:* {r.used_for}.")
    return "\n".join(lines)


def bibtex_all() -> str:
    """Every reference as BibTeX, in the list's order."""
    return "\n\n".join(r.bibtex() for r in REFERENCES) + "\n"


def cite(key: str) -> str:
    """A short in-text citation with the title, e.g. 'Purason et al. (2026), *Teaching Old Tokenizers …*'."""
    r = _BY_KEY[key]
    return f"{r.short}, *{r.title}*"
