"""Speech recognition: RNN-T in MLPerf's configuration (LibriSpeech-sized inputs).

Encoder: 2 LSTM layers of 1024 over 240-wide features (80 mel bins, 3 frames stacked), time reduction by 2, 3 more
LSTM layers; prediction network: an embedding of the 28 characters + blank and 2 LSTM layers of 320; joint: both
projected to 512, ReLU, then to the 29 symbols. The RNN-T loss is computed in PyTorch (no torchaudio), one time
step at a time over the T x (U+1) lattice, each step's label recursion a ``logcumsumexp``: exact, differentiable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.workloads.base import ModelInfo, Workload

if TYPE_CHECKING:
    import torch

BLANK = 0
NEG = -1e30  # log of zero, finite so that gradients stay defined


@dataclass(frozen=True)
class RnntConfig:
    features: int = 240
    frames: int = 400
    labels: int = 80
    vocab: int = 29
    enc_hidden: int = 1024
    pred_hidden: int = 320
    joint: int = 512


TINY = RnntConfig(features=16, frames=16, labels=5, enc_hidden=32, pred_hidden=16, joint=24)


def rnnt_loss(logits: "torch.Tensor", targets: "torch.Tensor", blank: int = BLANK) -> "torch.Tensor":
    """Mean negative log-likelihood of ``targets`` (B, U) under joint ``logits`` (B, T, U+1, V).

    alpha[t, u] = logaddexp(alpha[t-1, u] + blank[t-1, u], alpha[t, u-1] + label[t, u-1]).
    For a fixed t the label recursion unrolls to alpha[t] = L + logcumsumexp(a - L), where
    a[u] = alpha[t-1, u] + blank[t-1, u] and L[u] is the sum of label[t, :u].
    """
    import torch

    log_probs = logits.float().log_softmax(dim=-1)
    b, t_len, u1, _ = log_probs.shape
    blank_lp = log_probs[..., blank]  # (B, T, U+1)
    label_lp = log_probs[:, :, :-1, :].gather(-1, targets[:, None, :, None].expand(b, t_len, u1 - 1, 1)).squeeze(-1)
    zero = torch.zeros(b, t_len, 1, device=logits.device)
    cum = torch.cat([zero, label_lp.cumsum(dim=2)], dim=2)  # L[t, u] = sum of label[t, :u]
    a = torch.full((b, u1), NEG, device=logits.device)
    a[:, 0] = 0.0
    alpha = cum[:, 0] + torch.logcumsumexp(a - cum[:, 0], dim=1)
    for t in range(1, t_len):
        a = alpha + blank_lp[:, t - 1]
        alpha = cum[:, t] + torch.logcumsumexp(a - cum[:, t], dim=1)
    return -(alpha[:, -1] + blank_lp[:, -1, -1]).mean()


def _rnnt(cfg: RnntConfig) -> "torch.nn.Module":
    import torch
    from torch import nn

    class RNNT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pre = nn.LSTM(cfg.features, cfg.enc_hidden, num_layers=2, batch_first=True)
            self.post = nn.LSTM(2 * cfg.enc_hidden, cfg.enc_hidden, num_layers=3, batch_first=True)
            self.embed = nn.Embedding(cfg.vocab, cfg.pred_hidden)
            self.pred = nn.LSTM(cfg.pred_hidden, cfg.pred_hidden, num_layers=2, batch_first=True)
            self.enc_proj = nn.Linear(cfg.enc_hidden, cfg.joint)
            self.pred_proj = nn.Linear(cfg.pred_hidden, cfg.joint)
            self.out = nn.Linear(cfg.joint, cfg.vocab)

        def forward(self, features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            x, _ = self.pre(features)
            b, t, h = x.shape
            x = x[:, : t - t % 2].reshape(b, t // 2, 2 * h)  # time reduction: stack pairs of frames
            x, _ = self.post(x)
            start = torch.full((b, 1), BLANK, dtype=targets.dtype, device=targets.device)
            g, _ = self.pred(self.embed(torch.cat([start, targets], dim=1)))  # (B, U+1, P)
            joint = torch.relu(self.enc_proj(x).unsqueeze(2) + self.pred_proj(g).unsqueeze(1))
            logits: torch.Tensor = self.out(joint)  # (B, T/2, U+1, V)
            return logits

    return RNNT()


class RNNT(Workload):
    info = ModelInfo(
        name="rnnt",
        domain="speech recognition",
        sample_unit="utterances",
        input_shape="(batch, 400, 240) audio features, (batch, 80) characters",
        default_batch={"gpu": 32, "cpu": 2},
        source="RNN-T in MLPerf's configuration (encoder 5x1024 LSTM, prediction 2x320, joint 512); in accelbench",
    )

    def cfg(self, scale: str) -> RnntConfig:
        return RnntConfig() if scale == "full" else TINY

    def build(self, scale: str) -> "torch.nn.Module":
        return _rnnt(self.cfg(scale))

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        cfg = self.cfg(scale)
        features = torch.randn(batch_size, cfg.frames, cfg.features, device=device)
        targets = torch.randint(1, cfg.vocab, (batch_size, cfg.labels), device=device)
        return features, targets

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        features, targets = batch
        return rnnt_loss(model(features, targets), targets)
