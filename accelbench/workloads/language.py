"""Language: BERT pre-training (masked language modelling), base and large.

Defined here rather than imported (no weights, no tokenizer, nothing downloaded):
a post-LayerNorm transformer encoder with GELU feed-forward layers, learned
position and segment embeddings, and the MLM head tied to the word embeddings,
as in Devlin et al. (2019). The loss is cross-entropy on the 15% of positions
that are masked, the objective MLPerf's BERT benchmark trains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.workloads.base import ModelInfo, Workload

if TYPE_CHECKING:
    import torch

MASKED_FRACTION = 0.15


@dataclass(frozen=True)
class BertConfig:
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int = 30522
    seq_len: int = 512


TINY = BertConfig(layers=2, hidden=64, heads=2, ffn=128, vocab=1000, seq_len=64)


def _bert_model(cfg: BertConfig) -> "torch.nn.Module":
    import torch
    from torch import nn

    class Bert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding(cfg.vocab, cfg.hidden)
            self.positions = nn.Embedding(cfg.seq_len, cfg.hidden)
            self.segments = nn.Embedding(2, cfg.hidden)
            self.norm = nn.LayerNorm(cfg.hidden)
            layer = nn.TransformerEncoderLayer(
                cfg.hidden, cfg.heads, cfg.ffn, dropout=0.1, activation="gelu", batch_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
            self.transform = nn.Sequential(nn.Linear(cfg.hidden, cfg.hidden), nn.GELU(), nn.LayerNorm(cfg.hidden))
            self.bias = nn.Parameter(torch.zeros(cfg.vocab))
            for emb in (self.words, self.positions, self.segments):
                nn.init.normal_(emb.weight, std=0.02)  # BERT's initializer range

        def encode(self, tokens: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(tokens.shape[1], device=tokens.device)
            embedded = self.norm(self.words(tokens) + self.positions(pos) + self.segments(segments))
            hidden: torch.Tensor = self.encoder(embedded)
            return hidden

        def forward(self, tokens: torch.Tensor, segments: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
            x = self.encode(tokens, segments)
            # only the masked positions go through the vocabulary projection, as reference implementations do
            picked: torch.Tensor = self.transform(x[masked])
            return picked @ self.words.weight.t() + self.bias

    return Bert()


def span_model(cfg: BertConfig, seq_len: int | None = None) -> "torch.nn.Module":
    """The encoder with SQuAD's span head (start and end logits per token), as MLPerf Inference serves BERT."""
    from dataclasses import replace

    from torch import nn

    class BertSpans(nn.Module):
        bert: Any  # _bert_model's Bert: its encode is more than nn.Module declares

        def __init__(self) -> None:
            super().__init__()
            self.bert = _bert_model(replace(cfg, seq_len=seq_len or cfg.seq_len))
            self.span = nn.Linear(cfg.hidden, 2)

        def forward(self, tokens: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
            spans: torch.Tensor = self.span(self.bert.encode(tokens, segments))  # (batch, seq, 2)
            return spans

    return BertSpans()


class BertWorkload(Workload):
    config = BertConfig(layers=12, hidden=768, heads=12, ffn=3072)

    def cfg(self, scale: str) -> BertConfig:
        return self.config if scale == "full" else TINY

    def build(self, scale: str) -> "torch.nn.Module":
        return _bert_model(self.cfg(scale))

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        cfg = self.cfg(scale)
        tokens = torch.randint(0, cfg.vocab, (batch_size, cfg.seq_len), device=device)
        segments = (torch.arange(cfg.seq_len, device=device) >= cfg.seq_len // 2).long().expand(batch_size, -1)
        masked = torch.rand(batch_size, cfg.seq_len, device=device) < MASKED_FRACTION
        masked[:, 0] = True  # at least one masked token per sequence
        targets = torch.randint(0, cfg.vocab, (int(masked.sum().item()),), device=device)
        return tokens, segments, masked, targets

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        import torch.nn.functional as F

        tokens, segments, masked, targets = batch
        return F.cross_entropy(model(tokens, segments, masked), targets)


class BertBase(BertWorkload):
    config = BertConfig(layers=12, hidden=768, heads=12, ffn=3072)
    info = ModelInfo(
        name="bert",
        domain="language",
        sample_unit="sequences",
        input_shape="(batch, 512) tokens",
        default_batch={"gpu": 32, "cpu": 2},
        source="BERT-base (12 layers, 768 wide), masked-LM pre-training; defined in accelbench",
    )


class BertLarge(BertWorkload):
    config = BertConfig(layers=24, hidden=1024, heads=16, ffn=4096)
    info = ModelInfo(
        name="bert-large",
        domain="language",
        sample_unit="sequences",
        input_shape="(batch, 512) tokens",
        default_batch={"gpu": 16, "cpu": 1},
        source="BERT-large (24 layers, 1024 wide), masked-LM pre-training; defined in accelbench",
    )
