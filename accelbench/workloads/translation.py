"""Translation: the Transformer (base) of Vaswani et al. on WMT English-German-sized inputs.

``torch.nn.Transformer`` with the base configuration (6 + 6 layers, 512 wide, 8
heads, feed-forward 2048), shared source/target embeddings over a 33,708-token
vocabulary (the MLPerf WMT En-De BPE vocabulary), sinusoidal positions, a causal
decoder mask, and label-smoothed (0.1) cross-entropy on the next token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.workloads.base import ModelInfo, Workload

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TransformerConfig:
    layers: int = 6
    width: int = 512
    heads: int = 8
    ffn: int = 2048
    vocab: int = 33708
    seq_len: int = 128


TINY = TransformerConfig(layers=2, width=64, heads=2, ffn=128, vocab=1000, seq_len=32)


def _model(cfg: TransformerConfig) -> "torch.nn.Module":
    import torch
    from torch import nn

    class Seq2Seq(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(cfg.vocab, cfg.width)
            nn.init.normal_(self.embed.weight, std=cfg.width**-0.5)  # shared with the output projection
            self.core = nn.Transformer(
                cfg.width, cfg.heads, cfg.layers, cfg.layers, cfg.ffn, dropout=0.1, batch_first=True
            )
            pos = torch.arange(cfg.seq_len).unsqueeze(1)
            div = torch.exp(torch.arange(0, cfg.width, 2) * (-math.log(10000.0) / cfg.width))
            table = torch.zeros(cfg.seq_len, cfg.width)
            table[:, 0::2], table[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
            self.register_buffer("positions", table, persistent=False)
            self.scale = math.sqrt(cfg.width)

        def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
            s = self.embed(src) * self.scale + self.positions[: src.shape[1]]
            t = self.embed(tgt) * self.scale + self.positions[: tgt.shape[1]]
            mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
            out = self.core(s, t, tgt_mask=mask, tgt_is_causal=True)
            return out @ self.embed.weight.t()

    return Seq2Seq()


class TransformerBase(Workload):
    info = ModelInfo(
        name="transformer",
        domain="translation",
        sample_unit="sentence pairs",
        input_shape="(batch, 128) source and target tokens",
        default_batch={"cuda": 128, "cpu": 8},
        source="Transformer base (Vaswani et al. 2017) on torch.nn.Transformer; defined in accelbench",
    )

    def cfg(self, scale: str) -> TransformerConfig:
        return TransformerConfig() if scale == "full" else TINY

    def build(self, scale: str) -> "torch.nn.Module":
        return _model(self.cfg(scale))

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        cfg = self.cfg(scale)
        src = torch.randint(0, cfg.vocab, (batch_size, cfg.seq_len), device=device)
        tgt = torch.randint(0, cfg.vocab, (batch_size, cfg.seq_len + 1), device=device)
        return src, tgt

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        import torch.nn.functional as F

        src, tgt = batch
        logits = model(src, tgt[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1), label_smoothing=0.1)
