"""ProbTree (Cao et al. 2023, "Probabilistic Tree-of-thought Reasoning for Answering Knowledge-intensive
Complex Questions"): a question decomposition tree written by the LLM in one call (`tree`), then answered
bottom-up, each node by the most confident of closed-book, open-book and child-aggregating QA (`reasoning`)."""

from hoprag.search.probtree.reasoning import Candidate, Reasoner, read_answer
from hoprag.search.probtree.tree import Node, build_tree

__all__ = ["Candidate", "Node", "Reasoner", "build_tree", "read_answer"]
