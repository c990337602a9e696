"""PyTorch candidate: loss = logsumexp(logits) - logits[target], with ``torch.logsumexp`` (a
single reduction, writing one float per row) and a gather, instead of writing the full
log_softmax matrix and reading it back. Targets equal to ignore_index (-100) give 0, as
``F.cross_entropy(reduction="none")`` does."""

import torch
import torch.nn as nn

IGNORE_INDEX = -100


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        ignored = targets == IGNORE_INDEX
        safe = torch.where(ignored, torch.zeros_like(targets), targets)
        picked = logits.gather(1, safe.unsqueeze(1)).squeeze(1)
        loss = torch.logsumexp(logits, dim=1) - picked
        return torch.where(ignored, torch.zeros_like(loss), loss)
