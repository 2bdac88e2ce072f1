"""Ranking losses over groups of cross-encoder scores: column 0 is the positive, the rest its negatives.

`mask` marks real candidates (False: padding, for a question with fewer hard negatives than the group holds).
Listwise is the softmax cross-entropy of the positive among its group (the InfoNCE form rerankers are usually
trained with); pairwise is the logistic (RankNet) loss of the positive against each negative separately, so a
group with many easy negatives is not dominated by them the way a softmax can be by one hard one.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor


def listwise_loss(scores: Tensor, mask: Tensor) -> Tensor:
    """Mean over groups of −log softmax(scores)[positive], padding excluded. scores, mask: [groups, 1 + negatives]."""
    logits = scores.float().masked_fill(~mask, float("-inf"))
    return F.cross_entropy(logits, torch.zeros(len(scores), dtype=torch.long, device=scores.device))


def pairwise_loss(scores: Tensor, mask: Tensor) -> Tensor:
    """Mean over real (positive, negative) pairs of log(1 + exp(negative − positive))."""
    margins = scores[:, 1:].float() - scores[:, :1].float()
    real = mask[:, 1:]
    return F.softplus(margins)[real].sum() / real.sum().clamp(min=1)


LOSSES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"listwise": listwise_loss, "pairwise": pairwise_loss}
