"""RAG + MMR on the same fused pool: MMR (λ = 0.6) filling the token budget (Self-Correcting RAG's baseline)."""

from __future__ import annotations

from hoprag.methods.sc_rag_select import SCRAGSelect


class MMRRAG(SCRAGSelect):
    """`sc_rag_select` with an `MMRSelector` (conf/selector/mmr.yaml); everything else is shared."""

    name = "mmr_rag"
