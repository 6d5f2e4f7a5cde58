"""WMT English-German to a BLEU target with GNMT or the Transformer: MLPerf Training v0.5's two translation tasks.

A step is teacher-forced next-token prediction with label-smoothed cross-entropy over the real tokens. An
evaluation translates the whole split with length-normalised beam search and scores sacreBLEU's corpus BLEU on
the detokenized output; the ranks' n-gram counts are summed before the score, so several devices give the BLEU
one would. The targets are MLPerf v0.5's (GNMT 21.8, Transformer 25.0); at ``--scale tiny`` set ``--target`` for
the corpus given (docs/tta.md, Translation)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from accelbench.datasets.parallel import check_parallel, read_parallel, special_ids, subword_tokenizer
from accelbench.tta.recipes.base import Recipe, Schedule
from accelbench.tta.recipes.beam import beam_search
from accelbench.workloads.translation import GNMT_TINY, TINY, GnmtConfig, TransformerConfig, _gnmt, _model

if TYPE_CHECKING:
    import torch

SOURCE, TARGET = "en", "de"
MLPERF_V05 = "MLPerf Training v0.5 rules, quality targets"


@dataclass
class Pairs:
    """One split as token ids (source, target: lists of id lists), the raw target lines BLEU reads, and the
    tokenizer that made them."""

    src: list[list[int]]
    tgt: list[list[int]]
    refs: list[str]
    tokenizer: Any

    def __len__(self) -> int:
        return len(self.src)


class _Translation(Recipe):
    metric = "bleu"
    metric_range = (0.0, 100.0)
    batch_size = {"cpu": 32, "gpu": 128}
    gpu_precision = "amp_bf16"
    needs = (("sacrebleu", "tta"), ("tokenizers", "tta"))
    data_hint = "train.en/train.de and newstest2014.en/newstest2014.de (one sentence per line; test.* or valid.*)"
    #: tokens per training sentence at most (longer pairs are left out, as the references filter), by scale
    max_tokens: ClassVar[dict[str, int]] = {"full": 50, "tiny": 32}
    #: subword vocabulary trained when the folder has no tokenizer.json, by scale
    vocab_size: ClassVar[dict[str, int]] = {"full": 32000, "tiny": 1000}
    beam: ClassVar[int] = 5
    length_alpha: ClassVar[float] = 0.6
    label_smoothing: ClassVar[float] = 0.1

    def check_data(self, data_dir: Path) -> None:
        check_parallel(data_dir, SOURCE, TARGET)

    def load(self, data_dir: Path | None, scale: str) -> tuple[Pairs, Pairs]:
        assert data_dir is not None
        text = read_parallel(data_dir, SOURCE, TARGET)
        tok = subword_tokenizer(data_dir, text, self.vocab_size[scale])
        limit = self.max_tokens[scale]
        src, tgt = self._encode(tok, text.train[0]), self._encode(tok, text.train[1])
        keep = [i for i in range(len(src)) if 0 < len(src[i]) <= limit and 0 < len(tgt[i]) <= limit]
        train = Pairs([src[i] for i in keep], [tgt[i] for i in keep], [], tok)
        # evaluation keeps every sentence (BLEU over the whole set), the source cut to what the model can read
        val_src = [ids[: self.positions(scale) - 1] for ids in self._encode(tok, text.eval[0])]
        val = Pairs(val_src, [], text.eval[1], tok)
        return train, val

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        """The workload's model over the tokenizer's vocabulary; what the loss, decoding and log need is kept."""
        tok = data[0].tokenizer
        self._pad, self._positions, self._scale = special_ids(tok)[0], self.positions(scale), scale
        net, self._width = self.model(tok.get_vocab_size(), scale)
        return net

    def model(self, vocab: int, scale: str) -> tuple["torch.nn.Module", int]:
        """(the model at ``scale`` over ``vocab`` tokens, its width)."""
        raise NotImplementedError

    @staticmethod
    def _encode(tok: Any, lines: list[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(lines)]

    def positions(self, scale: str) -> int:
        """The longest sequence the model reads (the Transformer's position table)."""
        return 2 * self.max_tokens[scale] + 2

    def train_samples(self, train: Pairs) -> int:
        return len(train)

    def eval_samples(self, val: Pairs) -> int:
        return len(val)

    def steps_per_epoch(self, train: Pairs, global_batch: int) -> int:
        return max(1, len(train) // global_batch)

    def batches(
        self, train: Any, batch: int, epoch: int, seed: int, rank: int, world: int, device: "torch.device"
    ) -> Iterator[tuple[Any, ...]]:
        import torch

        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = torch.randperm(len(train), generator=g).tolist()
        pad, bos, eos = special_ids(train.tokenizer)
        for s in range(self.steps_per_epoch(train, batch * world)):
            idx = order[(s * world + rank) * batch : (s * world + rank + 1) * batch]
            src = _padded([train.src[i] for i in idx], pad)
            tgt = _padded([[bos, *train.tgt[i], eos] for i in idx], pad)
            src = src.to(device, non_blocking=True)
            tgt = tgt.to(device, non_blocking=True)
            yield src, src == pad, tgt[:, :-1], tgt[:, 1:]

    def loss(self, model: "torch.nn.Module", batch: tuple[Any, ...]) -> "torch.Tensor":
        import torch.nn.functional as F

        src, src_pad, tgt_in, tgt_out = batch
        logits = model(src, tgt_in, src_pad)
        target = tgt_out.masked_fill(tgt_out == self._pad, -100)  # padding is no prediction
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),
            target.reshape(-1),
            ignore_index=-100,
            label_smoothing=self.label_smoothing,
        )

    def evaluate_part(
        self, model: "torch.nn.Module", val: Any, device: "torch.device", rank: int = 0, world: int = 1
    ) -> tuple[list[int], list[int], int, int]:
        """This rank's translations of every ``world``-th sentence, as sacreBLEU's n-gram counts (summable)."""
        from sacrebleu.metrics.bleu import BLEU

        hyps = self.translate(model, val, device, range(rank, len(val), world))
        refs = val.refs[rank::world]
        if not hyps:
            return [0] * 4, [0] * 4, 0, 0
        score = BLEU().corpus_score(hyps, [refs])
        return list(score.counts), list(score.totals), score.sys_len, score.ref_len

    def combine(self, parts: list[Any]) -> float:
        from sacrebleu.metrics.bleu import BLEU

        counts = [sum(p[0][n] for p in parts) for n in range(4)]
        totals = [sum(p[1][n] for p in parts) for n in range(4)]
        sys_len, ref_len = sum(p[2] for p in parts), sum(p[3] for p in parts)
        return float(BLEU.compute_bleu(counts, totals, sys_len, ref_len, smooth_method="exp").score)

    def translate(self, model: Any, val: Pairs, device: "torch.device", indices: Any) -> list[str]:
        """Detokenized translations of ``val``'s sentences at ``indices``, by length-normalised beam search."""
        import torch

        pad, bos, eos = special_ids(val.tokenizer)
        indices = list(indices)
        out: list[str] = []
        net = getattr(model, "module", model)  # beam search runs the model itself, not its DDP wrapper
        limit = self._positions - 1
        with torch.no_grad():
            for start in range(0, len(indices), 64):
                chunk = [val.src[i] for i in indices[start : start + 64]]
                src = _padded(chunk, pad).to(device)
                longest = min(limit, int(1.5 * max(len(c) for c in chunk)) + 10)
                ids = beam_search(net, src, src == pad, bos, eos, longest, self.beam, self.length_alpha)
                out += val.tokenizer.decode_batch(ids)
        return out

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        import torch

        width = self._width
        warmup = max(1, min(self.warmup_steps, steps_per_epoch))
        lr = self.lr[self._scale]
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=self.betas, eps=1e-9)

        def lr_at(step: int) -> float:  # linear warm-up, then inverse square root (the Transformer's schedule)
            s = step + 1
            return lr * min(s / warmup, math.sqrt(warmup / s)) if self.decay else lr * min(1.0, s / warmup)

        hyper = {
            "opt_name": "adam",
            "opt_base_learning_rate": lr,
            "opt_learning_rate_warmup_steps": warmup,
            "opt_adam_beta_1": self.betas[0],
            "opt_adam_beta_2": self.betas[1],
            "opt_adam_epsilon": 1e-9,
            "model_width": width,
            "eval_beam_size": self.beam,
            "eval_length_normalization": self.length_alpha,
        }
        return Schedule(opt, lr_at, hyper)

    # set by build() from the data: the padding id the loss ignores, the position limit, the model's width
    _pad: int = 0
    _positions: int = 0
    _width: int = 0
    _scale: str = "full"
    #: peak learning rate by scale (a tiny model on a small corpus takes larger steps)
    lr: ClassVar[dict[str, float]] = {"full": 1e-3, "tiny": 5e-3}
    betas: ClassVar[tuple[float, float]] = (0.9, 0.98)
    warmup_steps: ClassVar[int] = 4000
    decay: ClassVar[bool] = True


def _padded(rows: list[list[int]], pad: int) -> "torch.Tensor":
    import torch

    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


class Transformer(_Translation):
    name = "transformer"
    target = 25.0
    max_epochs = 10
    mlperf_benchmark = "transformer"
    max_tokens = {"full": 256, "tiny": 32}
    beam = 4
    betas = (0.9, 0.98)
    warmup_steps = 4000
    source = (
        f"Transformer base (the workload's), Adam with warm-up and inverse-square-root decay, label smoothing 0.1, "
        f"beam 4 (length alpha 0.6); target 25.0 BLEU: {MLPERF_V05}"
    )

    def model(self, vocab: int, scale: str) -> tuple["torch.nn.Module", int]:
        from dataclasses import replace

        base = TransformerConfig() if scale == "full" else TINY
        return _model(replace(base, vocab=vocab, seq_len=self.positions(scale))), base.width


class Gnmt(_Translation):
    name = "gnmt"
    target = 21.8
    max_epochs = 8
    mlperf_benchmark = "gnmt"
    beam = 5
    lr = {"full": 2e-3, "tiny": 5e-3}
    betas = (0.9, 0.999)
    warmup_steps = 200
    decay = False
    source = (
        f"GNMT (4+4 LSTM layers, attention; the workload's), Adam with a short warm-up, label smoothing 0.1, "
        f"beam 5 (length alpha 0.6); target 21.8 sacreBLEU: {MLPERF_V05}"
    )

    def model(self, vocab: int, scale: str) -> tuple["torch.nn.Module", int]:
        from dataclasses import replace

        base = GnmtConfig() if scale == "full" else GNMT_TINY
        return _gnmt(replace(base, vocab=vocab)), base.hidden
