"""A trainable cross-encoder reranker (`python train.py +model=reranker`), served by `CrossEncoderReranker`.

`mining` the positives and hard negatives of a question (false negatives dropped by title); `losses` the listwise
and pairwise ranking losses; `ranking` gold-title recall@k and MRR of an order of a candidate pool; `data` the
Lightning datamodule (mined training groups, held-back validation pools); `module` the LightningModule and its
`export`, a Hugging Face folder that `reranker=cross_encoder reranker.model=<export>` (or `reranker=trained`) loads.
Submodules are imported directly (`hoprag.rerankers.module`), so none pulls in Lightning or transformers unasked.
"""
