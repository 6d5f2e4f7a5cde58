"""Translation: the Transformer (base) and GNMT on WMT English-German-sized inputs.

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
    from torch import nn

    class Seq2Seq(nn.Module):
        positions: torch.Tensor  # a buffer (register_buffer)

        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(cfg.vocab, cfg.width)
            nn.init.normal_(self.embed.weight, std=cfg.width**-0.5)  # shared with the output projection
            self.core = nn.Transformer(
                cfg.width, cfg.heads, cfg.layers, cfg.layers, cfg.ffn, dropout=0.1, batch_first=True
            )
            self.register_buffer("positions", _sinusoids(cfg.seq_len, cfg.width), persistent=False)
            self.scale = math.sqrt(cfg.width)

        def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_pad: torch.Tensor | None = None) -> torch.Tensor:
            """Logits of every target position; ``src_pad`` (True at padding) keeps padded source positions out of
            the encoder's and the decoder's attention (real sentences differ in length)."""
            s = self.embed(src) * self.scale + self.positions[: src.shape[1]]
            t = self.embed(tgt) * self.scale + self.positions[: tgt.shape[1]]
            mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
            out: torch.Tensor = self.core(
                s, t, tgt_mask=mask, tgt_is_causal=True, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad
            )
            return out @ self.embed.weight.t()

        # incremental decoding (beam search): the source is encoded once, and each step runs the decoder on the
        # newest token alone, attending to the keys and values the earlier steps cached (their layers' inputs are
        # causal, so a cached position never changes); what `forward` computes, for the last position

        def encode(self, src: torch.Tensor, src_pad: torch.Tensor | None) -> torch.Tensor:
            s = self.embed(src) * self.scale + self.positions[: src.shape[1]]
            memory: torch.Tensor = self.core.encoder(s, src_key_padding_mask=src_pad)
            return memory

        def step(
            self, memory: torch.Tensor, src_pad: torch.Tensor | None, token: torch.Tensor, position: int, state: Any
        ) -> tuple[torch.Tensor, Any]:
            """Next-token logits after ``token`` (one per row) at ``position``; ``state`` is None at the first step."""
            layers = self.core.decoder.layers
            if self.training or any(layer.norm_first for layer in layers):  # what the step below computes
                raise RuntimeError("incremental decoding is for evaluation (no dropout) of post-norm layers")
            if state is None:  # the cross-attention's keys and values, from the memory, once per layer
                state = [_cross_cache(layer, memory, cfg.width) for layer in layers]
            keep = None if src_pad is None else (~src_pad)[:, None, None, :]  # True where the source is attended
            x = self.embed(token[:, None]) * self.scale + self.positions[position]
            for layer, cache in zip(layers, state, strict=True):
                x = _layer_step(layer, x, cache, keep, cfg)
            return (self.core.decoder.norm(x) @ self.embed.weight.t())[:, 0], state

        @staticmethod
        def reorder(state: Any, index: torch.Tensor) -> Any:
            """The self-attention caches follow their beams; the cross-attention's stay, as every beam of a sentence
            has the same source and a beam's parent is always of its own sentence."""
            return [cache | {"k": cache["k"][index], "v": cache["v"][index]} for cache in state]

    return Seq2Seq()


def _sinusoids(seq_len: int, width: int) -> "torch.Tensor":
    """The Transformer's fixed sinusoidal position table, (seq_len, width)."""
    import torch

    pos = torch.arange(seq_len).unsqueeze(1)
    div = torch.exp(torch.arange(0, width, 2) * (-math.log(10000.0) / width))
    table = torch.zeros(seq_len, width)
    table[:, 0::2], table[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return table


def _cross_cache(layer: Any, memory: "torch.Tensor", width: int) -> dict[str, "torch.Tensor"]:
    """A decoder layer's cache for incremental decoding: its cross-attention's keys and values of the memory, and
    its self-attention's, empty so far."""
    import torch.nn.functional as F

    w, b = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
    k, v = F.linear(memory, w[width:], b[width:]).chunk(2, dim=-1)
    empty = memory.new_zeros(memory.shape[0], 0, width)
    return {"mk": k, "mv": v, "k": empty, "v": empty}


def _layer_step(
    layer: Any, x: "torch.Tensor", cache: dict[str, "torch.Tensor"], keep: "torch.Tensor | None", cfg: TransformerConfig
) -> "torch.Tensor":
    """One post-norm decoder layer on the newest position alone, its keys and values appended to ``cache``."""
    import torch
    import torch.nn.functional as F

    sa = layer.self_attn
    q, k, v = F.linear(x, sa.in_proj_weight, sa.in_proj_bias).chunk(3, dim=-1)
    cache["k"], cache["v"] = torch.cat([cache["k"], k], 1), torch.cat([cache["v"], v], 1)
    x = layer.norm1(x + sa.out_proj(_attend(q, cache["k"], cache["v"], None, cfg.heads)))
    ca = layer.multihead_attn
    q = F.linear(x, ca.in_proj_weight[: cfg.width], ca.in_proj_bias[: cfg.width])
    x = layer.norm2(x + ca.out_proj(_attend(q, cache["mk"], cache["mv"], keep, cfg.heads)))
    out: torch.Tensor = layer.norm3(x + layer.linear2(layer.activation(layer.linear1(x))))
    return out


def _attend(
    q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", keep: "torch.Tensor | None", n_heads: int
) -> "torch.Tensor":
    import torch.nn.functional as F

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(t.shape[0], t.shape[1], n_heads, -1).transpose(1, 2)

    out = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), attn_mask=keep)
    return out.transpose(1, 2).reshape(q.shape)


class _Translation(Workload):
    """Teacher-forced next-token prediction on random sentence pairs, label-smoothed (0.1) as published."""

    def cfg(self, scale: str) -> Any:
        raise NotImplementedError

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


class TransformerBase(_Translation):
    info = ModelInfo(
        name="transformer",
        domain="translation",
        sample_unit="sentence pairs",
        input_shape="(batch, 128) source and target tokens",
        default_batch={"gpu": 128, "cpu": 8},
        source="Transformer base (Vaswani et al. 2017) on torch.nn.Transformer; defined in accelbench",
    )

    def cfg(self, scale: str) -> TransformerConfig:
        return TransformerConfig() if scale == "full" else TINY

    def build(self, scale: str) -> "torch.nn.Module":
        return _model(self.cfg(scale))


@dataclass(frozen=True)
class GnmtConfig:
    hidden: int = 1024
    layers: int = 4
    vocab: int = 32320
    seq_len: int = 50


GNMT_TINY = GnmtConfig(hidden=64, layers=4, vocab=1000, seq_len=12)


def _attention(h: int) -> "torch.nn.Module":
    import torch
    from torch import nn

    class Attention(nn.Module):
        """Normalised Bahdanau (additive) attention, as in the GNMT reference."""

        def __init__(self) -> None:
            super().__init__()
            self.query = nn.Linear(h, h, bias=False)
            self.key = nn.Linear(h, h, bias=False)
            self.v = nn.Parameter(torch.empty(h).uniform_(-0.1, 0.1))
            self.g = nn.Parameter(torch.tensor(1.0 / math.sqrt(h)))
            self.b = nn.Parameter(torch.zeros(h))

        def forward(self, q: torch.Tensor, keys: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
            v = self.g * self.v / self.v.norm()
            scores: torch.Tensor = torch.tanh(self.query(q).unsqueeze(2) + self.key(keys).unsqueeze(1) + self.b) @ v
            if pad is not None:  # padded source positions get no attention
                scores = scores.masked_fill(pad.unsqueeze(1), float("-inf"))
            return scores.softmax(dim=-1) @ keys  # (batch, target, hidden) context

    return Attention()


def _bidirectional(lstm: Any, emb: "torch.Tensor", src_pad: "torch.Tensor | None") -> "torch.Tensor":
    """The bidirectional layer over the embedded source, each sentence packed to its length where there is padding
    (its backward direction would otherwise start in the padding, as the reference packs it)."""
    from torch import nn

    if src_pad is None:
        out: torch.Tensor = lstm(emb)[0]
        return out
    lengths = (~src_pad).sum(1).cpu()
    packed = nn.utils.rnn.pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
    x, _ = nn.utils.rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=emb.shape[1])
    return x


def _gnmt(cfg: GnmtConfig) -> "torch.nn.Module":
    import torch
    from torch import nn

    h = cfg.hidden

    class GNMT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.src_embed = nn.Embedding(cfg.vocab, h)
            self.tgt_embed = nn.Embedding(cfg.vocab, h)
            self.enc_bi = nn.LSTM(h, h // 2, batch_first=True, bidirectional=True)
            self.enc = nn.ModuleList(nn.LSTM(h, h, batch_first=True) for _ in range(cfg.layers - 1))
            self.dec_first = nn.LSTM(h, h, batch_first=True)
            self.attention = _attention(h)
            self.dec = nn.ModuleList(nn.LSTM(2 * h, h, batch_first=True) for _ in range(cfg.layers - 1))
            self.classifier = nn.Linear(h, cfg.vocab)

        def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_pad: torch.Tensor | None = None) -> torch.Tensor:
            """Logits of every target position. With ``src_pad`` (True at padding) the bidirectional layer reads
            each sentence packed to its length (its backward direction would otherwise start in the padding, as
            the reference packs it) and attention skips the padding."""
            logits, _ = self.decode(self.encode(src, src_pad), src_pad, tgt, None)
            return logits

        def encode(self, src: torch.Tensor, src_pad: torch.Tensor | None) -> torch.Tensor:
            x = _bidirectional(self.enc_bi, self.src_embed(src), src_pad)
            for i, layer in enumerate(self.enc):
                y, _ = layer(x)
                x = y + x if i > 0 else y  # residual connections from the third encoder layer on
            return x

        def decode(
            self, memory: torch.Tensor, src_pad: torch.Tensor | None, tgt: torch.Tensor, state: Any
        ) -> tuple[torch.Tensor, list[Any]]:
            """Logits of ``tgt``'s positions, continuing from the LSTMs' ``state`` (None: from the start)."""
            state = state or [None] * (1 + len(self.dec))
            y, first = self.dec_first(self.tgt_embed(tgt), state[0])
            context = self.attention(y, memory, src_pad)  # from the first decoder layer, fed to every later one
            after = [first]
            for i, layer in enumerate(self.dec):
                out, hc = layer(torch.cat([y, context], dim=-1), state[i + 1])
                y = out + y if i > 0 else out
                after.append(hc)
            return self.classifier(y), after

        def step(
            self, memory: torch.Tensor, src_pad: torch.Tensor | None, token: torch.Tensor, position: int, state: Any
        ) -> tuple[torch.Tensor, Any]:
            """Next-token logits after ``token``: one step of every LSTM from its carried state."""
            logits, state = self.decode(memory, src_pad, token[:, None], state)
            return logits[:, 0], state

        @staticmethod
        def reorder(state: Any, index: torch.Tensor) -> Any:
            return [(h[:, index], c[:, index]) for h, c in state]

    return GNMT()


class GNMT(_Translation):
    info = ModelInfo(
        name="gnmt",
        domain="translation",
        sample_unit="sentence pairs",
        input_shape="(batch, 50) source and target tokens",
        default_batch={"gpu": 128, "cpu": 8},
        source="GNMT (Wu et al. 2016) in MLPerf's configuration: 4+4 LSTM layers of 1024, attention; in accelbench",
    )

    def cfg(self, scale: str) -> GnmtConfig:
        return GnmtConfig() if scale == "full" else GNMT_TINY

    def build(self, scale: str) -> "torch.nn.Module":
        return _gnmt(self.cfg(scale))
