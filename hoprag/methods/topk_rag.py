"""Naive RAG on the same fused pool: the first k passages (Self-Correcting RAG's top-k baseline)."""

from __future__ import annotations

from hoprag.methods.base import register
from hoprag.methods.sc_rag_select import SCRAGSelect


@register("topk_rag")
class TopKRAG(SCRAGSelect):
    """`sc_rag_select` with a `TopKSelector` (conf/selector/topk.yaml); everything else is shared."""
