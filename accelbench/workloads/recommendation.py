"""Recommendation: NCF (NeuMF, He et al. 2017) at MovieLens-20M size, as MLPerf trains it.

Generalised matrix factorisation and an MLP over user and item embeddings,
fused by a final linear layer; binary cross-entropy on (user, item, clicked)
triples. Sizes are MLPerf's: 138,493 users, 26,744 items, 64-wide MF embeddings,
MLP layers 256-256-128-64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.workloads.base import ModelInfo, Workload

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class NcfConfig:
    users: int = 138493
    items: int = 26744
    mf_dim: int = 64
    mlp: tuple[int, ...] = (256, 256, 128, 64)


TINY = NcfConfig(users=1000, items=500, mf_dim=8, mlp=(32, 16, 8))


def _neumf(cfg: NcfConfig) -> "torch.nn.Module":
    import torch
    from torch import nn

    class NeuMF(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mf_user = nn.Embedding(cfg.users, cfg.mf_dim)
            self.mf_item = nn.Embedding(cfg.items, cfg.mf_dim)
            self.mlp_user = nn.Embedding(cfg.users, cfg.mlp[0] // 2)
            self.mlp_item = nn.Embedding(cfg.items, cfg.mlp[0] // 2)
            layers: list[nn.Module] = []
            for a, b in zip(cfg.mlp[:-1], cfg.mlp[1:], strict=True):
                layers += [nn.Linear(a, b), nn.ReLU()]
            self.mlp = nn.Sequential(*layers)
            self.out = nn.Linear(cfg.mf_dim + cfg.mlp[-1], 1)

        def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
            mf = self.mf_user(users) * self.mf_item(items)
            mlp = self.mlp(torch.cat([self.mlp_user(users), self.mlp_item(items)], dim=1))
            return self.out(torch.cat([mf, mlp], dim=1)).squeeze(1)

    return NeuMF()


class NCF(Workload):
    info = ModelInfo(
        name="ncf",
        domain="recommendation",
        sample_unit="user-item pairs",
        input_shape="(batch,) user ids and item ids",
        default_batch={"cuda": 65536, "cpu": 8192},
        source="NeuMF (He et al. 2017) at MLPerf's MovieLens-20M sizes; defined in accelbench",
    )

    def cfg(self, scale: str) -> NcfConfig:
        return NcfConfig() if scale == "full" else TINY

    def build(self, scale: str) -> "torch.nn.Module":
        return _neumf(self.cfg(scale))

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        cfg = self.cfg(scale)
        users = torch.randint(0, cfg.users, (batch_size,), device=device)
        items = torch.randint(0, cfg.items, (batch_size,), device=device)
        labels = (torch.rand(batch_size, device=device) < 0.25).float()
        return users, items, labels

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        import torch.nn.functional as F

        users, items, labels = batch
        return F.binary_cross_entropy_with_logits(model(users, items).float(), labels)
