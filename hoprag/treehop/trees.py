"""Retrieval trees from 2Wiki evidence triples: which paragraph each hop must retrieve, from which query.

For every triple `(s, r, o)` the paragraph about `s` is a node; when `o` is itself a gold paragraph the
tree has an edge `para(s) → para(o)`, otherwise `para(s)` ends a path (its answer is a literal: a date, a
place name). The first layer holds the paragraphs no edge points to. A record whose decomposition does not
have the shape its type needs (spec/treehop.md §5.2: one first-layer node for compositional/inference, two
or more first- and last-layer nodes for bridge_comparison), has no edge, has a cycle or names a subject
no context paragraph matches is skipped with a reason, never silently. MuSiQue records (an optional second
source) use their decomposition instead: a step citing "#i" hangs under step i's paragraph. HotpotQA bridge
records have neither: hop 1 is the supporting paragraph whose title the question names, hop 2 the other one
(comparison questions are excluded, as the paper excludes 2Wiki's).
"""

from __future__ import annotations

import difflib
import html
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from hoprag.data.twowiki import base_title, match_title, normalize_title
from hoprag.data.types import Passage, QAExample

TREE_TYPES = ("compositional", "inference", "bridge_comparison")
HOTPOT_TYPES = ("bridge", "comparison")
CLOSE_MATCH = 0.8  # difflib ratio at which a run of question words counts as naming a title


@dataclass(frozen=True)
class TreeNode:
    """A positive paragraph reached from its parent's query (`parent` = -1: from the question itself).

    `negatives` are the candidate negatives: the question's own paragraphs minus this layer's positives and
    their children (earlier-hop positives stay eligible, as in the paper). They are sampled per epoch.
    """

    passage_id: str
    parent: int
    depth: int
    negatives: tuple[str, ...]


@dataclass(frozen=True)
class Tree:
    """Nodes in breadth-first (depth) order, so every parent comes before its children."""

    qid: str
    question: str
    type: str
    nodes: tuple[TreeNode, ...]
    gold_titles: tuple[str, ...]

    @property
    def depth(self) -> int:
        return max(n.depth for n in self.nodes)


def _subject_paragraph(name: str, context: list[Passage], gold: list[str]) -> str | None:
    """The title of the paragraph about `name`: exact, normalised or word-subset title, else a paragraph whose
    text starts with the name."""
    titles = [p.title for p in context]
    found = match_title(name, titles, gold)
    if found is not None:
        return found
    key = normalize_title(name)
    starts = [p.title for p in context if normalize_title(p.text).startswith(key)]
    return starts[0] if len(set(starts)) == 1 else None


def _object_paragraph(name: str, gold: list[str]) -> str | None:
    """The gold paragraph an evidence object names, matched strictly (exact or normalised title), so that a
    literal answer ("France") never becomes an edge to a longer gold title ("France national team")."""
    if name in gold:
        return name
    key = normalize_title(name)
    return next((t for t in gold if key and key in (normalize_title(t), normalize_title(base_title(t)))), None)


def build_tree(example: QAExample) -> Tree | str:
    """The example's retrieval tree, or the reason it has none (2Wiki evidences, MuSiQue decompositions or
    HotpotQA's named title)."""
    if not example.evidences and example.decomposition:  # MuSiQue: sub-questions with support paragraphs
        return _musique_tree(example)
    if not example.evidences and example.type in HOTPOT_TYPES:  # HotpotQA: two supporting paragraphs, no hops
        return _hotpot_tree(example)
    if example.type not in TREE_TYPES:
        return "type"
    by_title = _first_per_title(example)
    context = list(by_title.values())
    gold = [t for t in example.supporting_titles if t in by_title]
    if not example.evidences:
        return "no_evidences"
    edges: dict[str, list[str]] = {}
    for subject, _, obj in example.evidences:
        source = _subject_paragraph(subject, context, gold)
        if source is None:
            return "unmatched"
        edges.setdefault(source, [])
        target = _object_paragraph(obj, gold)
        if target is not None and target != source and target not in edges[source]:
            edges[source].append(target)
    return _unroll(example, by_title, edges, two_branches=example.type == "bridge_comparison")


def _musique_tree(example: QAExample) -> Tree | str:
    """MuSiQue's decomposition as a tree: sub-question j hangs under the last earlier step it cites as "#i"
    (`paragraph_support_idx` gives each step's paragraph, here its title)."""
    by_title = _first_per_title(example)
    titles = [hop.support_title for hop in example.decomposition]
    if len(titles) < 2:
        return "single_hop"
    if any(t not in by_title for t in titles) or len(set(titles)) != len(titles):
        return "unmatched"
    edges: dict[str, list[str]] = {t: [] for t in titles}
    for j, hop in enumerate(example.decomposition):
        cited = [int(i) - 1 for i in re.findall(r"#(\d+)", hop.question) if 0 < int(i) <= j]
        if cited:
            edges[titles[max(cited)]].append(titles[j])
    return _unroll(example, by_title, edges, two_branches=False)


def _hotpot_tree(example: QAExample) -> Tree | str:
    """A bridge question's 2-hop chain: the question names the bridge entity's paragraph (hop 1), whose text leads
    to the answer's paragraph (hop 2). Skipped when the question names neither or both supporting titles."""
    if example.type == "comparison":
        return "comparison"
    by_title = _first_per_title(example)
    gold = example.supporting_titles
    if len(gold) != 2:
        return "integrity"
    if any(t not in by_title for t in gold):
        return "unmatched"
    named = _named_titles(example.question, gold)
    if len(named) != 1:
        return "neither_named" if not named else "both_named"
    first, second = named[0], next(t for t in gold if t != named[0])
    return _unroll(example, by_title, {first: [second], second: []}, two_branches=False)


def _named_titles(question: str, titles: list[str]) -> list[str]:
    """The titles the question names, fuzzy only where needed: the title or its base title ("X (film)" → "X")
    as a phrase of the normalised question; failing that for every title, all of the base title's words among
    the question's ("Scott Andrew Buchholz" names "Scott Buchholz"); failing that, a close match of as many
    consecutive question words. HotpotQA titles keep HTML entities ("Simon &amp; Simon"), so they are unescaped."""
    words = normalize_title(question).split()
    padded = f" {' '.join(words)} "
    full = {t: normalize_title(html.unescape(t)) for t in titles}
    base = {t: normalize_title(base_title(html.unescape(t))) for t in titles}
    named = [t for t in titles if any(k and f" {k} " in padded for k in (full[t], base[t]))]
    if named:
        return named
    named = [t for t in titles if base[t] and set(base[t].split()) <= set(words)]
    if named:
        return named

    def close(key: str) -> bool:
        n = len(key.split())
        runs = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
        return bool(difflib.get_close_matches(key, runs, n=1, cutoff=CLOSE_MATCH))

    return [t for t in titles if base[t] and close(base[t])]


def _first_per_title(example: QAExample) -> dict[str, Passage]:
    by_title: dict[str, Passage] = {}
    for passage in example.context:  # 2Wiki repeats some paragraphs: the first one per title
        by_title.setdefault(passage.title, passage)
    return by_title


def _unroll(example: QAExample, by_title: dict[str, Passage], edges: dict[str, list[str]], two_branches: bool) -> Tree | str:
    """Check the graph's shape, then lay it out breadth first from the question with each layer's negatives."""
    for targets in list(edges.values()):
        for target in targets:
            edges.setdefault(target, [])
    if not any(edges.values()):
        return "single_hop"
    targets = {t for ts in edges.values() for t in ts}
    first = [s for s in edges if s not in targets]
    last = [s for s, ts in edges.items() if not ts]
    if not first:
        return "cycle"
    if two_branches:
        if len(first) < 2 or len(last) < 2:
            return "integrity"
    elif len(first) != 1 or not last:
        return "integrity"

    nodes: list[TreeNode] = []
    layer: list[tuple[str, int]] = [(title, -1) for title in first]
    depth = 1
    while layer:
        if depth > len(edges):
            return "cycle"
        excluded = {t for t, _ in layer} | {c for t, _ in layer for c in edges[t]}
        pool = tuple(p.id for p in by_title.values() if p.title not in excluded)
        next_layer = []
        for title, parent in layer:
            nodes.append(TreeNode(by_title[title].id, parent, depth, pool))
            next_layer.extend((child, len(nodes) - 1) for child in edges[title])
        layer, depth = next_layer, depth + 1
    return Tree(example.id, example.question, example.type or "", tuple(nodes), tuple(example.supporting_titles))


def build_trees(examples: Iterable[QAExample]) -> tuple[list[Tree], Counter]:
    """Trees of the examples that have one, and how many were skipped for each reason."""
    trees, skipped = [], Counter()
    for example in examples:
        tree = build_tree(example)
        if isinstance(tree, Tree):
            trees.append(tree)
        else:
            skipped[tree] += 1
    return trees, skipped
