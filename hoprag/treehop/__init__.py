"""TreeHop (spec/treehop.md): an embedding-level multi-hop query rewriter.

Will hold the gated cross-attention update h = q - c + W_out·G(q, c), its InfoNCE training on 2Wiki
hop paths (a LightningModule and DataModule), and tree inference with redundancy and layer-wise top-K
pruning, usable as a retriever of any generation method.
"""
