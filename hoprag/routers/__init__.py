"""Knowledge-source routers (spec/pruningrag.md).

Will hold PruningRAG's coarse-grained pruning (a LoRA-tuned LLM router that picks which knowledge
sources to consult, trained with peft + Lightning) and fine-grained pruning (BM25 then dense pruning of
web pages and mock-API results) on CRAG.
"""
