"""Recommendation: NCF (NeuMF, He et al. 2017) at MovieLens-20M size, and DLRM, as MLPerf trains them.

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
            logit: torch.Tensor = self.out(torch.cat([mf, mlp], dim=1))
            return logit.squeeze(1)

    return NeuMF()


class NCF(Workload):
    info = ModelInfo(
        name="ncf",
        domain="recommendation",
        sample_unit="user-item pairs",
        input_shape="(batch,) user ids and item ids",
        default_batch={"gpu": 65536, "cpu": 8192},
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


@dataclass(frozen=True)
class DlrmConfig:
    dense: int = 13
    tables: int = 26
    rows: int = 100_000
    dim: int = 128
    bottom: tuple[int, ...] = (512, 256, 128)
    top: tuple[int, ...] = (1024, 1024, 512, 256, 1)


DLRM_TINY = DlrmConfig(tables=4, rows=1000, dim=8, bottom=(16, 8), top=(16, 1))


def _dlrm(cfg: DlrmConfig) -> "torch.nn.Module":
    import torch
    from torch import nn

    def mlp(sizes: tuple[int, ...], last_act: bool) -> nn.Sequential:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            layers.append(nn.Linear(a, b))
            if last_act or i < len(sizes) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    features = cfg.tables + 1
    interactions = features * (features - 1) // 2

    class DLRM(nn.Module):
        rows: torch.Tensor  # buffers (register_buffer): the index pairs of the pairwise interactions
        cols: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.bottom = mlp((cfg.dense, *cfg.bottom), last_act=True)
            self.embeddings = nn.ModuleList(nn.EmbeddingBag(cfg.rows, cfg.dim, mode="sum") for _ in range(cfg.tables))
            self.top = mlp((cfg.dim + interactions, *cfg.top), last_act=False)
            rows, cols = torch.tril_indices(features, features, offset=-1)
            self.register_buffer("rows", rows, persistent=False)
            self.register_buffer("cols", cols, persistent=False)

        def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
            x = self.bottom(dense)
            embedded = [emb(sparse[:, i : i + 1]) for i, emb in enumerate(self.embeddings)]
            t = torch.stack([x, *embedded], dim=1)  # (batch, features, dim)
            dots = torch.bmm(t, t.transpose(1, 2))[:, self.rows, self.cols]  # pairwise dot interaction
            logit: torch.Tensor = self.top(torch.cat([x, dots], dim=1))
            return logit.squeeze(1)

    return DLRM()


class DLRM(Workload):
    info = ModelInfo(
        name="dlrm",
        domain="recommendation",
        sample_unit="samples",
        input_shape="(batch, 13) dense + (batch, 26) categorical ids",
        default_batch={"gpu": 32768, "cpu": 2048},
        source=(
            "DLRM with MLPerf's architecture (bottom MLP 512-256-128, 26 tables of dim 128, dot interaction, "
            "top MLP 1024-1024-512-256-1); tables hashed to 100,000 rows (Criteo 1TB's are ~100 GB)"
        ),
    )

    def cfg(self, scale: str) -> DlrmConfig:
        return DlrmConfig() if scale == "full" else DLRM_TINY

    def build(self, scale: str) -> "torch.nn.Module":
        return _dlrm(self.cfg(scale))

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        cfg = self.cfg(scale)
        dense = torch.rand(batch_size, cfg.dense, device=device).log1p()
        sparse = torch.randint(0, cfg.rows, (batch_size, cfg.tables), device=device)
        clicks = (torch.rand(batch_size, device=device) < 0.03).float()
        return dense, sparse, clicks

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        import torch.nn.functional as F

        dense, sparse, clicks = batch
        return F.binary_cross_entropy_with_logits(model(dense, sparse).float(), clicks)
