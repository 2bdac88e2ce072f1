"""Naive RAG on the same fused pool: the first k passages (Self-Correcting RAG's top-k baseline)."""

from __future__ import annotations

from hoprag.methods.sc_rag_select import SCRAGSelect


class TopKRAG(SCRAGSelect):
    """`sc_rag_select` with a `TopKSelector` (conf/selector/topk.yaml); everything else is shared."""

    name = "topk_rag"
