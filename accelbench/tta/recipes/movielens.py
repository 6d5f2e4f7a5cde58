"""MovieLens ml-20m to HR@10 0.635 with NCF (NeuMF): MLPerf Training v0.5-0.7's recommendation benchmark.

As MLPerf's reference: every rating is an implicit positive, each user's latest
one is held out; training pairs each positive with 4 sampled negatives (items
the user has not rated); evaluation ranks the held-out item among 999 sampled
negatives and counts a hit when it is in the top 10. Adam with lr 0.0045,
betas (0.25, 0.5), global batch 1,048,576 (scaled down on a CPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from accelbench.datasets.training import Ratings, check_movielens, movielens
from accelbench.tta.recipes.base import Recipe, Schedule
from accelbench.workloads.recommendation import TINY, NcfConfig, _neumf

if TYPE_CHECKING:
    import torch

NEGATIVES_TRAIN, NEGATIVES_EVAL, TOP_K = 4, 999, 10


class MovieLens(Recipe):
    name = "movielens"
    metric = "hr@10"
    target = 0.635
    max_epochs = 20
    batch_size = {"cpu": 65536, "gpu": 1048576}
    mlperf_benchmark = "ncf"
    data_hint = "ratings.csv (userId,movieId,rating,timestamp) of MovieLens ml-20m"
    source = "NeuMF (64-dim MF + MLP 256-256-128-64), Adam lr 0.0045 betas (0.25, 0.5): MLPerf NCF reference"
    LR, BETAS = 0.0045, (0.25, 0.5)

    def check_data(self, data_dir: Path) -> None:
        check_movielens(data_dir)

    def load(self, data_dir: Path | None, scale: str) -> tuple[Ratings, Any]:
        assert data_dir is not None
        ratings = movielens(data_dir)
        return ratings, _eval_candidates(ratings, seed=0)

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        ratings = data[0]
        base = NcfConfig() if scale == "full" else TINY
        return _neumf(NcfConfig(users=ratings.users, items=ratings.items, mf_dim=base.mf_dim, mlp=base.mlp))

    def train_samples(self, train: Ratings) -> int:
        return len(train.train_users) * (1 + NEGATIVES_TRAIN)

    def eval_samples(self, val: Any) -> int:
        return int(val[0].shape[0])

    def steps_per_epoch(self, train: Ratings, global_batch: int) -> int:
        return max(1, -(-self.train_samples(train) // global_batch))

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        import torch

        opt = torch.optim.Adam(model.parameters(), lr=self.LR, betas=self.BETAS, eps=1e-8)
        hyper = {"opt_name": "adam", "opt_base_learning_rate": self.LR}
        return Schedule(opt, None, hyper | {"opt_adam_beta_1": self.BETAS[0], "opt_adam_beta_2": self.BETAS[1]})

    def batches(
        self, train: Any, batch: int, epoch: int, seed: int, rank: int, world: int, device: "torch.device"
    ) -> Iterator[tuple[Any, ...]]:
        import torch

        rng = np.random.default_rng(seed * 1000 + epoch)
        users = np.repeat(train.train_users, 1 + NEGATIVES_TRAIN)
        items = np.repeat(train.train_items, 1 + NEGATIVES_TRAIN)
        labels = np.tile(np.r_[1.0, np.zeros(NEGATIVES_TRAIN)], len(train.train_users)).astype(np.float32)
        negative = labels == 0
        items[negative] = _sample_unseen(train, users[negative], rng)
        order = rng.permutation(len(users))
        for s in range(self.steps_per_epoch(train, batch * world)):
            idx = order[(s * world + rank) * batch : (s * world + rank + 1) * batch]
            if len(idx) == 0:
                continue
            yield tuple(torch.from_numpy(a[idx]).to(device) for a in (users, items, labels))

    def loss(self, model: "torch.nn.Module", batch: tuple[Any, ...]) -> "torch.Tensor":
        import torch.nn.functional as F

        users, items, labels = batch
        return F.binary_cross_entropy_with_logits(model(users, items).float(), labels)

    def evaluate(
        self, model: "torch.nn.Module", val: Any, device: "torch.device", rank: int = 0, world: int = 1
    ) -> tuple[float, int]:
        """HR@10: the held-out item ranks in the top 10 of itself and its 999 negatives (ties count against it)."""
        import torch

        users, candidates = val[0][rank::world], val[1][rank::world]
        hits = 0
        with torch.no_grad():
            for start in range(0, len(users), 1024):
                u = torch.from_numpy(users[start : start + 1024]).to(device)
                c = torch.from_numpy(candidates[start : start + 1024]).to(device)
                scores = model(u[:, None].expand_as(c).reshape(-1), c.reshape(-1)).float().view(c.shape)
                better = (scores[:, 1:] >= scores[:, :1]).sum(1)
                hits += int((better < TOP_K).sum())
        return float(hits), len(users)


def _sample_unseen(r: Ratings, users: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Items each user has not rated, drawn uniformly (redrawn where a draw hits a rated item)."""
    items = rng.integers(0, r.items, len(users))
    for _ in range(100):
        clash = r.rated(users, items)
        if not clash.any():
            break
        items[clash] = rng.integers(0, r.items, int(clash.sum()))
    return items


def _eval_candidates(r: Ratings, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per test user: the held-out item first, then 999 unrated items (fixed for every evaluation and seed)."""
    rng = np.random.default_rng(seed)
    users = r.test_users
    negatives = _sample_unseen(r, np.repeat(users, NEGATIVES_EVAL), rng).reshape(len(users), NEGATIVES_EVAL)
    return users.astype(np.int64), np.concatenate([r.test_items[:, None], negatives], axis=1).astype(np.int64)
