"""Beam search for an encoder-decoder that maps (source, target prefix, source padding) to next-token logits.

Length-normalised as GNMT (Wu et al. 2016) and the Transformer's reference decode: a finished hypothesis is
ranked by its log-probability over ``((5 + length) / 6) ** alpha``. A model that decodes incrementally (``encode``,
``step``, ``reorder``: the workloads' Transformer with its keys and values cached, GNMT with its LSTM states)
encodes the source once and runs one position per step; any other re-runs on the whole prefix every step. One
beam is greedy decoding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def beam_search(
    model: Any,
    src: "torch.Tensor",
    src_pad: "torch.Tensor",
    bos: int,
    eos: int,
    max_len: int,
    beams: int,
    alpha: float,
) -> list[list[int]]:
    """The best hypothesis per source row, as token ids without ``<s>`` and ``</s>``."""
    import torch

    batch, k = src.shape[0], beams
    src_k, pad_k = src.repeat_interleave(k, 0), src_pad.repeat_interleave(k, 0)
    seqs = torch.full((batch * k, 1), bos, dtype=torch.long, device=src.device)
    scores = torch.zeros(batch, k, device=src.device)
    scores[:, 1:] = float("-inf")  # every beam starts as the same <s>: only the first may be extended at first
    done = torch.zeros(batch * k, dtype=torch.bool, device=src.device)
    lengths = torch.zeros(batch * k, device=src.device)
    incremental = all(hasattr(model, name) for name in ("encode", "step", "reorder"))
    memory = model.encode(src, src_pad).repeat_interleave(k, 0) if incremental else None
    state = None
    for position in range(max_len):
        if incremental:
            logits, state = model.step(memory, pad_k, seqs[:, -1], position, state)
        else:
            logits = model(src_k, seqs, pad_k)[:, -1]
        logp = logits.float().log_softmax(-1)
        vocab = logp.shape[-1]
        # a finished hypothesis extends only by padding its end, at no cost, so it keeps its score
        logp[done] = float("-inf")
        logp[done, eos] = 0.0
        cand = (scores.view(-1, 1) + logp).view(batch, k * vocab)
        top, flat = cand.topk(k, dim=1)
        parent = (torch.arange(batch, device=src.device) * k).unsqueeze(1) + flat // vocab
        token = (flat % vocab).view(-1)
        parent = parent.view(-1)
        was_done = done[parent]
        seqs = torch.cat([seqs[parent], token.unsqueeze(1)], dim=1)
        if incremental:
            state = model.reorder(state, parent)
        lengths = lengths[parent] + (~was_done).float()
        done = was_done | (token == eos)
        scores = top
        if bool(done.all()):
            break
    penalty = ((5.0 + lengths) / 6.0) ** alpha
    best = (scores.view(-1) / penalty).view(batch, k).argmax(1)
    rows = seqs[torch.arange(batch, device=src.device) * k + best].tolist()
    out = []
    for row in rows:
        ids = row[1:]
        out.append(ids[: ids.index(eos)] if eos in ids else ids)
    return out
