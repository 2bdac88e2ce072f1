"""Knowledge-source routers (spec/pruningrag.md).

PruningRAG's coarse-grained pruning: a router reads the question alone and picks the knowledge sources to
consult by option letter. `options` holds the option sets, their prompt and the reply parser; `router` the
LLM router (tuned with a LoRA adapter, or not); `classifier` a small embedder + linear-head router;
`training` the LoRA SFT; `labels` the training labels (TAT-QA's gold `answer_from`, or the paper's judged
outcomes with the similar-question fallback); `outcomes` answers and judges each router-training question once
per source (cached) to build those outcome labels. The context-disjoint router-training / evaluation split and
its leak check, the wall-clock budget and the exports' `router.json` are shared with other trainers
(`hoprag.training`); fine-grained pruning of the sources' content lives in `hoprag.sources`.
Submodules are imported directly (`hoprag.routers.router`), so that no one of them pulls in another's weights.
"""
