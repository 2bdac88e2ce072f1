"""NLI-guided Monte Carlo tree search over answers (spec/self_correcting_rag.md §5.3–5.5), batched over questions.

Each tree's nodes are the root (the selected context), *answer* nodes (one sampled answer each, with the
context of their parent) and *augment* nodes (the parent's context plus up to `augment_add_k` new passages).
One simulation, for every question of the batch at once:

1. **select**: from the root, descend through expanded nodes by UCT, Q + c·sqrt(ln N(s) / N(s,a)) with
   unvisited children first (or PUCT, Q + c·P(a|s)·sqrt(N(s)) / (1 + N(s,a)), with a uniform prior or one
   from the answers' mean token log-probs);
2. **expand** the leaf reached, if it lies above `max_depth` (depth = edges from the root): `branching`
   answers are sampled under its context and become its answer children; an answer node's children are
   thus further samples under the same context (the released code's "re-sample" semantics). If the
   augment retrieval (the question, plus the leaf's answer for an answer leaf) finds passages not yet in
   the context, an augment child is added too, when it lies above `max_depth` (so it can be expanded);
3. **evaluate** every new answer child by the NLI reward of its answer under its context, and
   **backpropagate** each reward to the root as a running mean (Eq. 9). A leaf at `max_depth` is not
   expanded: its cached reward is backpropagated again.

A new augment child is rolled out at once (`augment_rollout`, the default: §5.5's recommended algorithm):
one answer is sampled under its augmented context, scored with the step's other answers and stored as its
first answer child, so the augment branch enters selection with a value, like its answer siblings. The
augment child stays unexpanded: when selection first reaches it, its expansion adds `branching` more
answers (and possibly its own augment child) next to that rollout answer. `augment_rollout=False` defers
it instead (hoprag's earlier behaviour): an augment child has no answer until it is first selected (UCT
takes unvisited children first, so that is the next simulation through its parent), and is then
evaluated by that expansion.

One simulation step of the whole batch makes at most two `llm.generate` calls: one for every expansion
(one prompt per expanding leaf, n = `branching`; temperature 0.7, top-p 0.9, 256 new tokens by default) and
one for the rollouts of that step's new augment children (n = 1); plus one batched retrieval (stage
"augment") and one batched reward (its wall time charged evenly as stage "reward").

Sampling is seeded per question: with `seed` set, a prompt's sampling seed is derived from (`seed`, a hash
of the question text, the step, expansion or rollout), so a question's tree is the same whatever other
questions share its batch, and whatever the batch size. `seed: None` samples unseeded (not reproducible).
PUCT's log-prob prior treats an answer whose sample came without log-probs as unconfident: it gets the
prior of its least confident sibling with log-probs (all unknown: a uniform share); such samples are
counted per tree (`SearchTree.missing_logprobs`).

The final answer is the answer node with the highest mean value Q, ties broken by more visits, then by a
higher own reward, then by creation order.

Ceiling: a question's search makes at most `max_llm_calls` LLM calls (128 by default: the paper's budget, N = 24,
makes at most 48, its largest sweep, N = 64, 128). A simulation starts for a question only while its worst case
(the expansion call, plus the rollout call with `augment_rollout`) still fits; after that the question stops
simulating, keeps its tree as it is (the answer is chosen from it as usual), counts as capped and its trace
says after how many simulations. The progress bar ticks per simulation with the tree nodes, the questions
still simulating and the LLM calls and tokens so far.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hoprag.cost import Cost, charge_evenly
from hoprag.data.types import Passage
from hoprag.llm.base import LLM, Prompt
from hoprag.llm.types import Generation
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.sc_rag_answer import ParsedAnswer
from hoprag.search.steps import capped
from hoprag.utils import progress
from hoprag.verifiers.reward import Candidate, RewardResult

SELECTIONS = ("uct", "puct")
PRIORS = ("uniform", "logprob")
AUGMENT_QUERIES = ("question", "question+answer")
EXPANSION, ROLLOUT = 0, 1  # sampling streams of a step


def sample_seed(seed: int, question: str, step: int, stream: int = EXPANSION) -> int:
    """The sampling seed of one question's samples at `step` (expansion or rollout `stream`): a stable hash
    (not Python's salted `hash`) of all four, 31 bits, so it is the same in every process and batch."""
    digest = hashlib.sha256(f"{seed}\x00{step}\x00{stream}\x00{question}".encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1


@dataclass(frozen=True)
class MCTSConfig:
    """Search budget and policy; defaults are the paper's (Tables 10 and 11: N = 24, k = 3, depth 3, c = 1.4)."""

    simulations: int = 24
    branching: int = 3
    max_depth: int = 3
    selection: str = "uct"
    c: float = 1.4
    prior: str = "uniform"  # PUCT only
    augment: bool = True
    augment_rollout: bool = True  # roll out one answer under a new augment child at once (§5.5); False: defer
    augment_query: str = "question+answer"  # "question" is the released code's choice
    augment_search_k: int = 10
    augment_add_k: int = 3
    temperature: float = 0.7
    top_p: float = 0.9
    max_new_tokens: int = 256
    seed: int | None = None  # per-question sampling seeds derived from it (`sample_seed`); None: unseeded
    max_llm_calls: int = 128  # per-question ceiling (module docstring)

    def __post_init__(self) -> None:
        if min(self.simulations, self.branching, self.max_depth, self.augment_add_k, self.augment_search_k) < 1:
            raise ValueError(f"simulations, branching, max_depth and augment sizes must be positive: {self}")
        if self.max_llm_calls < self.step_calls:
            raise ValueError(
                f"method.search.max_llm_calls must allow one simulation ({self.step_calls} LLM calls), "
                f"got {self.max_llm_calls}"
            )
        for name, value, allowed in (
            ("selection", self.selection, SELECTIONS),
            ("prior", self.prior, PRIORS),
            ("augment_query", self.augment_query, AUGMENT_QUERIES),
        ):
            if value not in allowed:
                raise ValueError(f"mcts {name} must be one of {allowed}, got {value!r}")
        if self.branching > 1 and self.temperature == 0:
            raise ValueError("branching > 1 needs temperature > 0 (greedy samples are identical)")

    @property
    def step_calls(self) -> int:
        """The most LLM calls one simulation makes for one question: an expansion, and a rollout."""
        return 1 + (self.augment and self.augment_rollout)


@dataclass(eq=False)
class Node:
    id: int
    kind: str  # "root", "answer" or "augment"
    depth: int
    ctx: tuple[Passage, ...]
    parent: Node | None = None
    parsed: ParsedAnswer | None = None  # answer nodes
    reward: float | None = None  # answer nodes: the reward of their own answer
    mean_logprob: float | None = None
    prior: float = 1.0
    children: list[Node] = field(default_factory=list)
    expanded: bool = False
    visits: int = 0
    value_sum: float = 0.0

    @property
    def q(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0

    def path(self) -> list[Node]:
        """This node and its ancestors, up to the root."""
        node: Node | None = self
        nodes = []
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes


def backpropagate(node: Node, reward: float) -> None:
    """Eq. 9 on every edge from `node` to the root: one more visit, the reward added to the running sum."""
    for n in node.path():
        n.visits += 1
        n.value_sum += reward


def uct(child: Node, parent_visits: int, c: float) -> float:
    if child.visits == 0:
        return math.inf
    return child.q + c * math.sqrt(math.log(max(parent_visits, 1)) / child.visits)


def puct(child: Node, parent_visits: int, c: float) -> float:
    return child.q + c * child.prior * math.sqrt(parent_visits) / (1 + child.visits)


def best_child(node: Node, selection: str, c: float) -> Node:
    """The child maximising the selection score; the first one on ties."""
    score = uct if selection == "uct" else puct
    return max(node.children, key=lambda ch: score(ch, node.visits, c))


def select(root: Node, selection: str = "uct", c: float = 1.4) -> Node:
    node = root
    while node.expanded and node.children:
        node = best_child(node, selection, c)
    return node


def final_answer(root: Node) -> Node | None:
    """The answer node with the highest mean Q; ties: more visits, then higher own reward, then older."""
    answers = [n for n in iter_nodes(root) if n.kind == "answer"]
    return max(answers, key=lambda n: (n.q, n.visits, n.reward), default=None)


def iter_nodes(root: Node) -> list[Node]:
    """All nodes in creation order (ids are assigned in creation order)."""
    stack, nodes = [root], []
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.children)
    return sorted(nodes, key=lambda n: n.id)


@dataclass
class SearchTree:
    """One question's search: the tree, and what it cost."""

    question: str
    root: Node
    cost: Cost | None = None
    size: int = 1
    simulations: int = 0
    samples: int = 0
    nli_pairs: int = 0
    missing_logprobs: int = 0  # answer samples that came without log-probs (unknown confidence)
    llm_calls: int = 0  # the search's own (one per prompt, whatever its samples)
    capped: dict[str, Any] | None = None  # stopped at `max_llm_calls`: after how many simulations

    def new_node(self, **fields: Any) -> Node:
        node = Node(id=self.size, **fields)
        self.size += 1
        return node

    def best(self) -> Node | None:
        return final_answer(self.root)

    def to_trace(self, raw: bool = False) -> dict[str, Any]:
        """The tree as JSON: every node with its visits, mean value and reward (raw text if `raw`)."""
        best = self.best()
        answered = [n for n in iter_nodes(self.root) if n.reward is not None]
        top = max(answered, key=lambda n: n.reward, default=None)
        nodes = []
        for n in iter_nodes(self.root):
            record: dict[str, Any] = {
                "id": n.id,
                "parent": n.parent.id if n.parent else None,
                "kind": n.kind,
                "depth": n.depth,
                "visits": n.visits,
                "value": round(n.q, 4),
            }
            if n.parsed is not None:
                record.update(reward=round(n.reward, 4), answer=n.parsed.answer, format=n.parsed.format)
                if raw:
                    record["raw"] = n.parsed.raw
            if n.kind == "augment" and n.parent is not None:
                record["added"] = [p.id for p in n.ctx if p not in n.parent.ctx]
            nodes.append(record)
        return {
            "chosen": best.id if best else None,
            "capped": self.capped,
            "best_reward_node": top.id if top else None,
            "best_reward_answer": top.parsed.answer if top and top.parsed else None,
            "nodes": nodes,
        }


class AnswerSearch:
    """Runs the search for a batch of questions: per step, one LLM call for the expansions (and one for the
    new augment children's rollouts), one retrieval and one reward call.

    `prompt(question, passages)` renders the generator prompt; `parse(raw)` reads an answer from a sample;
    `reward(candidates)` scores answers (Eq. 2); `retriever` serves augment children (none: no augments).
    `settings` are the search's budget and policy, `MCTSConfig`'s fields (which checks them): a method's
    config gives them as its `search` child, and the method passes the rest.
    """

    def __init__(
        self,
        llm: LLM,
        prompt: Callable[[str, Sequence[Passage]], Prompt],
        parse: Callable[[str], ParsedAnswer],
        reward: Callable[[Sequence[Candidate]], list[RewardResult]],
        retriever: Retriever | None = None,
        **settings: Any,
    ) -> None:
        self.llm = llm
        self.prompt = prompt
        self.parse = parse
        self.reward = reward
        self.config = MCTSConfig(**settings)
        self.retriever = retriever

    def run(
        self, questions: Sequence[str], contexts: Sequence[Sequence[Passage]], costs: Sequence[Cost] | None = None
    ) -> list[SearchTree]:
        if len(questions) != len(contexts) or (costs is not None and len(costs) != len(questions)):
            raise ValueError("one context (and one cost record) per question")
        trees = [
            SearchTree(q, Node(id=0, kind="root", depth=0, ctx=tuple(ctx)), costs[i] if costs else None)
            for i, (q, ctx) in enumerate(zip(questions, contexts))
        ]
        # a simulation steps every question's tree at once: the bar ticks per simulation (minutes each on a CPU)
        desc = f"MCTS over {len(trees)} question{'s' * (len(trees) != 1)}"
        with progress.bar(total=self.config.simulations, desc=desc, unit="simulation", leave=False) as shown:
            for step in range(self.config.simulations):
                active = self.within_ceiling(trees)
                if not active:
                    break
                nodes = sum(t.size for t in trees)
                shown.set_postfix(questions=len(active), nodes=nodes, **progress.spent(t.cost for t in trees))
                self.simulate(active, step)
                shown.update()
        return trees

    def within_ceiling(self, trees: Sequence[SearchTree]) -> list[SearchTree]:
        """The trees that may run one more simulation; one whose worst case no longer fits `max_llm_calls`
        is marked capped (once) and stops simulating."""
        cfg = self.config
        for tree in trees:
            if tree.capped is None and tree.llm_calls + cfg.step_calls > cfg.max_llm_calls:
                tree.capped = capped(tree.question, "max_llm_calls", cfg.max_llm_calls,
                                     simulations_run=tree.simulations, simulations=cfg.simulations)  # fmt: skip
        return [tree for tree in trees if tree.capped is None]

    def simulate(self, trees: Sequence[SearchTree], step: int = 0) -> None:
        """One select → expand → evaluate → backpropagate round over all trees."""
        cfg = self.config
        expanding: list[tuple[SearchTree, Node]] = []
        for tree in trees:
            tree.simulations += 1
            leaf = select(tree.root, cfg.selection, cfg.c)
            if leaf.depth >= cfg.max_depth:
                backpropagate(leaf, leaf.reward if leaf.reward is not None else 0.0)
            else:
                expanding.append((tree, leaf))
        if not expanding:
            return
        augments = self._augment_passages(expanding)
        generations = self._sample([(tree, leaf.ctx) for tree, leaf in expanding], step, EXPANSION, cfg.branching)
        new: list[tuple[SearchTree, Node]] = []
        fresh: list[tuple[SearchTree, Node]] = []  # new augment children
        for (tree, leaf), samples, added in zip(expanding, generations, augments):
            new += [(tree, self._answer_child(tree, leaf, g)) for g in samples]
            tree.samples += len(samples)
            if added:
                augment = tree.new_node(kind="augment", depth=leaf.depth + 1, ctx=leaf.ctx + tuple(added), parent=leaf)
                leaf.children.append(augment)
                fresh.append((tree, augment))
            self._set_priors(leaf)
            leaf.expanded = True
        if cfg.augment_rollout and fresh:
            rollouts = self._sample([(tree, aug.ctx) for tree, aug in fresh], step, ROLLOUT, 1)
            for (tree, augment), (sample,) in zip(fresh, rollouts):
                new.append((tree, self._answer_child(tree, augment, sample)))
                tree.samples += 1
        started = time.perf_counter()
        results = self.reward(
            [Candidate(t.question, n.parsed.answer, n.parsed.reasoning, n.parsed.raw, n.ctx) for t, n in new]
        )
        share = charge_evenly([tree.cost for tree, _ in expanding], time.perf_counter() - started)
        for tree, _ in expanding:
            if tree.cost is not None:
                tree.cost.seconds["reward"] += share
        for (tree, node), result in zip(new, results):
            node.reward = result.value
            tree.nli_pairs += result.pairs
            backpropagate(node, result.value)

    def _sample(
        self, requests: Sequence[tuple[SearchTree, tuple[Passage, ...]]], step: int, stream: int, n: int
    ) -> list[list[Generation]]:
        """`n` samples per (tree, context) in one batched call, each question with its own seed."""
        cfg = self.config
        seeds = None
        if cfg.seed is not None:
            seeds = [sample_seed(cfg.seed, tree.question, step, stream) for tree, _ in requests]
        for tree, _ in requests:
            tree.llm_calls += 1
        return self.llm.generate(
            [self.prompt(tree.question, ctx) for tree, ctx in requests],
            costs=[tree.cost for tree, _ in requests],
            stage="mcts",
            seeds=seeds,
            n=n,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
        )

    def _answer_child(self, tree: SearchTree, leaf: Node, generation: Generation) -> Node:
        node = tree.new_node(
            kind="answer",
            depth=leaf.depth + 1,
            ctx=leaf.ctx,
            parent=leaf,
            parsed=self.parse(generation.text),
            mean_logprob=generation.mean_logprob,
        )
        tree.missing_logprobs += node.mean_logprob is None
        leaf.children.append(node)
        return node

    def _augment_passages(self, expanding: Sequence[tuple[SearchTree, Node]]) -> list[list[Passage]]:
        """New passages for each expanding leaf's augment child (empty: no augment child), one batched search."""
        cfg = self.config
        wanted = [
            i for i, (_, leaf) in enumerate(expanding)
            if cfg.augment and self.retriever is not None and leaf.depth + 1 < cfg.max_depth
        ]
        added: list[list[Passage]] = [[] for _ in expanding]
        if not wanted:
            return added
        queries = []
        for i in wanted:
            tree, leaf = expanding[i]
            answer = leaf.parsed.answer if leaf.parsed is not None else ""
            use_answer = cfg.augment_query == "question+answer" and answer
            queries.append(f"{tree.question} {answer}" if use_answer else tree.question)
        assert self.retriever is not None
        hits = self.retriever.search(
            queries, cfg.augment_search_k, costs=[expanding[i][0].cost for i in wanted], stage="augment"
        )
        for i, found in zip(wanted, hits):
            have = {p.id for p in expanding[i][1].ctx}
            added[i] = [h.passage for h in found if h.passage.id not in have][: cfg.augment_add_k]
        return added

    def _set_priors(self, node: Node) -> None:
        """PUCT priors of a freshly expanded node's children: uniform, or the answers share (k / (k+1) with an
        augment child, which gets 1 / (k+1)) in proportion to exp(mean token log-prob). Unknown is
        unconfident: an answer without a mean log-prob is weighted as its least confident known sibling (all
        unknown: equal shares)."""
        children = node.children
        if self.config.prior == "uniform":
            for ch in children:
                ch.prior = 1.0 / len(children)
            return
        answers = [ch for ch in children if ch.kind == "answer"]
        share = len(answers) / len(children)
        known = [ch.mean_logprob for ch in answers if ch.mean_logprob is not None]
        floor = min(known, default=0.0)
        logps = [ch.mean_logprob if ch.mean_logprob is not None else floor for ch in answers]
        top = max(logps)
        weights = [math.exp(lp - top) for lp in logps]
        for ch, w in zip(answers, weights):
            ch.prior = share * w / sum(weights)
        for ch in children:
            if ch.kind == "augment":
                ch.prior = 1.0 / len(children)
