"""LLM-driven search over reasoning structures, each batched over the questions of a batch:

- `prunerag/`: PruneRAG's confidence-guided query decomposition trees, built round by round, and their
  aggregation into one answer (spec/prunerag.md);
- `treerare/`: TreeRare's syntax-tree-guided bottom-up retrieval and reasoning (spaCy / Stanza parse trees,
  the level-batched QG → BM25 → SAG walk, and its LLM-free retrieval variant; spec/treerare.md);
- `mcts.py`: Self-Correcting RAG's NLI-guided Monte Carlo tree search over answers (spec/self_correcting_rag.md
  §5.3–5.5), and `sc_rag_answer.py`, its generator's snippet rendering and JSON answer parsing;
- `steps.py`: one level of a tree search for every question at once (one batched LLM call and retrieval),
  with each search's per-question ceiling;
- `turns.py`: the turn loop of the agentic baselines (ReAct, Self-Ask, IRCoT, Search-o1): one batched LLM
  turn and one batched retrieval per step, questions leaving the batch as they finish, `max_turns` counted.

The methods in `hoprag/methods/` wire these engines to an LLM and a retriever.
"""

from hoprag.search.mcts import AnswerSearch, MCTSConfig
from hoprag.search.prunerag import PruneTreeBuilder

__all__ = ["AnswerSearch", "MCTSConfig", "PruneTreeBuilder"]
