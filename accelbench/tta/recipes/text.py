"""A decoder preset trained on a local plain-text corpus to a validation loss (time to quality for a language model),
the shape of MLPerf's Llama 3.1 8B on C4 kept on whatever text a user has.

The ``.txt`` files are tokenized with the folder's ``tokenizer.json``, else byte-level, and cut into fixed-length
sequences (a sample is one). The quality is validation cross-entropy in nats per token (lower is better), so the
default target only means something for a corpus like the one it was set on: set ``--target`` for your own. The
splits, scales and their sizes are in docs/tta.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

import numpy as np

from accelbench.errors import UsageError
from accelbench.tta.recipes.base import Recipe, Schedule
from accelbench.workloads.decoder import PRESETS, config_of

if TYPE_CHECKING:
    import torch

#: tokens per sequence by scale: the decoder workload's synthetic lengths
SEQ_LEN = {"tiny": 128, "full": 2048}
#: the part of the sequences held out when the folder has no val*.txt
VAL_FRACTION = 0.1
#: below this many bytes check_data tokenizes the corpus to check its size exactly (above it, it is surely enough)
EXACT_CHECK_BYTES = 4 << 20
#: the names a tokenizer's end-of-text token goes by, tried in order when tokenizer.json does not say which
EOS_NAMES = ("<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>", "[SEP]")
BYTE_EOS = 256


@dataclass
class TokenSplit:
    """One split as fixed-length sequences of token ids, and the tokenizer they came from."""

    ids: "torch.Tensor"  # (sequences, seq_len), int64
    vocab: int
    tokenizer: str

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def text_files(data_dir: Path) -> list[Path]:
    """The corpus: every ``.txt`` file under ``data_dir``, in name order (the order the stream is read in)."""
    return sorted(p for p in data_dir.rglob("*.txt") if p.is_file())


def _role(path: Path) -> str:
    """train, val or test, by the file's name (val*, valid*, validation* / test*)."""
    name = path.name.lower()
    return "val" if name.startswith("val") else "test" if name.startswith("test") else "train"


class Tokenizer:
    """The folder's ``tokenizer.json`` through transformers' fast tokenizer, else UTF-8 bytes (vocab 257)."""

    def __init__(self, data_dir: Path) -> None:
        path = data_dir / "tokenizer.json"
        self.fast: Any = None
        self.eos: int | None = BYTE_EOS
        self.vocab = BYTE_EOS + 1
        self.name = "bytes (UTF-8, 256 + <eos>)"
        if path.is_file():
            from transformers import PreTrainedTokenizerFast

            try:
                self.fast = PreTrainedTokenizerFast(tokenizer_file=str(path))
            except Exception as exc:  # a corrupt or foreign JSON: say which file, in one line
                raise UsageError(f"{path} is not a Hugging Face tokenizer.json: {exc}") from None
            self.vocab = len(self.fast)
            ids = [self.fast.convert_tokens_to_ids(t) for t in EOS_NAMES if t in self.fast.get_vocab()]
            self.eos = ids[0] if ids else None
            self.name = f"tokenizer.json ({self.vocab} tokens)"

    def encode(self, text: str) -> np.ndarray:
        """One document's ids, its end-of-text token appended (where the tokenizer has one)."""
        if self.fast is None:
            ids = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)
        else:
            ids = np.asarray(self.fast(text, add_special_tokens=False)["input_ids"], dtype=np.int64)
        return np.append(ids, self.eos) if self.eos is not None else ids


def corpus(data_dir: Path, seq_len: int) -> tuple[TokenSplit, TokenSplit]:
    """(train, validation) sequences of the folder's text, or a usage error saying why there are none."""
    import torch

    files = text_files(data_dir)
    if not files:
        raise UsageError(f"{data_dir} holds no .txt files: expected {TextDecoder.data_hint}")
    tok = Tokenizer(data_dir)
    streams: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
        streams[_role(path)].append(tok.encode(text))

    def cut(parts: list[np.ndarray]) -> np.ndarray:
        ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        n = len(ids) // seq_len
        return ids[: n * seq_len].reshape(n, seq_len)

    train = cut(streams["train"])
    if streams["val"]:
        val = cut(streams["val"])
    else:  # the last tenth of the stream, at least one sequence
        held = max(1, round(VAL_FRACTION * len(train))) if len(train) > 1 else 0
        train, val = train[: len(train) - held], train[len(train) - held :]
    if len(train) == 0 or len(val) == 0:
        raise UsageError(
            f"the corpus in {data_dir} is too small: {len(train)} training and {len(val)} validation sequences "
            f"of {seq_len} tokens ({tok.name}); at least one of each is needed"
        )
    return (
        TokenSplit(torch.from_numpy(np.ascontiguousarray(train)), tok.vocab, tok.name),
        TokenSplit(torch.from_numpy(np.ascontiguousarray(val)), tok.vocab, tok.name),
    )


class TextDecoder(Recipe):
    """Next-token prediction of a decoder preset on a local corpus, to a validation loss; AdamW, warm-up, cosine."""

    preset: ClassVar[str]
    metric = "val_loss"
    metric_range = (0.0, math.inf)
    #: the quality is a loss: the target is reached at or below it (read by the loop)
    lower_is_better: ClassVar[bool] = True
    #: nats per token: what the tiny model reaches within a few epochs on English prose, byte-level (this
    #: repository's docs/ as .txt, about 1.8 after 3 epochs on a 2-core CPU); a BPE corpus needs its own --target
    target = 2.0
    max_epochs = 10
    batch_size = {"cpu": 16, "gpu": 64}
    gpu_precision = "amp_bf16"
    data_hint = (
        "plain-text .txt files (UTF-8, read recursively; val*.txt is the validation split, test*.txt is left out, "
        "else the last 10% is held out) and optionally a Hugging Face tokenizer.json (else byte-level tokens)"
    )
    #: peak learning rate by scale: 3e-3 suits the 2-layer, 64-wide tiny model; 3e-4 is Llama 2's for 7B, whose
    #: betas, weight decay and cosine decay to a tenth of the peak these are too (Touvron et al., 2023)
    LR: ClassVar[dict[str, float]] = {"tiny": 3e-3, "full": 3e-4}
    WEIGHT_DECAY, BETAS, WARMUP = 0.1, (0.9, 0.95), 0.02

    def __init__(self) -> None:
        self._lr = self.LR["tiny"]
        self._data: dict[str, Any] = {}  # set by load: the tokenizer, lengths and token counts the logs record

    def check_data(self, data_dir: Path) -> None:
        """No .txt files, or (on a corpus small enough to tokenize at once) not one sequence per split: exit 2."""
        files = text_files(data_dir)
        if not files:
            raise UsageError(f"{data_dir} holds no .txt files: expected {self.data_hint}")
        if sum(p.stat().st_size for p in files) < EXACT_CHECK_BYTES:
            corpus(data_dir, min(SEQ_LEN.values()))

    def load(self, data_dir: Path | None, scale: str) -> tuple[TokenSplit, TokenSplit]:
        assert data_dir is not None
        train, val = corpus(data_dir, SEQ_LEN[scale])
        self._lr = self.LR[scale]
        self._data = {"max_sequence_length": SEQ_LEN[scale], "vocab_size": train.vocab, "tokenizer": train.tokenizer}
        self._data |= {"train_tokens": train.ids.numel(), "eval_tokens": val.ids.numel()}
        return train, val

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        """The preset's architecture at ``scale`` with the tokenizer's vocabulary, its weights from the seed."""
        from transformers import AutoModelForCausalLM

        preset = PRESETS[self.preset]
        config = config_of(preset, scale)
        config.vocab_size = data[0].vocab
        config.use_cache = False
        model: torch.nn.Module = AutoModelForCausalLM.from_config(config, attn_implementation=preset.attention)
        return model

    def stage(self, split: TokenSplit, device: "torch.device") -> TokenSplit:
        return split if device.type == "cpu" else TokenSplit(split.ids.to(device), split.vocab, split.tokenizer)

    def steps_per_epoch(self, train: TokenSplit, global_batch: int) -> int:
        return max(1, len(train) // global_batch)

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        """AdamW (Llama's betas and decay), linear warm-up over 2% of the steps, cosine to a tenth by --max-epochs."""
        import torch

        total = steps_per_epoch * epochs
        warmup = max(1, round(self.WARMUP * total))

        def lr_at(step: int) -> float:
            if step < warmup:
                return self._lr * (step + 1) / warmup
            done = min(1.0, (step - warmup) / max(1, total - warmup))
            return self._lr * (0.1 + 0.45 * (1 + math.cos(math.pi * done)))

        opt = torch.optim.AdamW(model.parameters(), lr=self._lr, betas=self.BETAS, weight_decay=self.WEIGHT_DECAY)
        hyper = {
            "opt_name": "adamw",
            "opt_base_learning_rate": self._lr,
            "opt_adamw_beta_1": self.BETAS[0],
            "opt_adamw_beta_2": self.BETAS[1],
            "opt_adamw_weight_decay": self.WEIGHT_DECAY,
            "opt_learning_rate_warmup_steps": warmup,
            "opt_learning_rate_decay_schedule": "cosine to 0.1x",
        } | self._data  # what the corpus became, into each seed's MLPerf log
        return Schedule(opt, lr_at, hyper)

    def batches(
        self, train: Any, batch: int, epoch: int, seed: int, rank: int, world: int, device: "torch.device"
    ) -> Iterator[tuple[Any, ...]]:
        import torch

        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = torch.randperm(len(train), generator=g).to(train.ids.device)
        for s in range(self.steps_per_epoch(train, batch * world)):
            idx = order[(s * world + rank) * batch : (s * world + rank + 1) * batch]
            yield (train.ids[idx].to(device, non_blocking=True),)

    def loss(self, model: "torch.nn.Module", batch: tuple[Any, ...]) -> "torch.Tensor":
        (ids,) = batch
        loss: torch.Tensor = model(input_ids=ids, labels=ids).loss
        return loss

    def evaluate(
        self, model: "torch.nn.Module", val: Any, device: "torch.device", rank: int = 0, world: int = 1
    ) -> tuple[float, int]:
        """(summed cross-entropy, predicted tokens) over this rank's sequences: the loop's ratio is nats per token."""
        import torch
        import torch.nn.functional as F

        ids = val.ids[rank::world]
        chunk = max(1, min(64, (1 << 25) // (ids.shape[1] * val.vocab)))  # logits of at most 32M floats at once
        total = 0.0
        with torch.no_grad():
            for start in range(0, len(ids), chunk):
                x = ids[start : start + chunk].to(device)
                logits = model(input_ids=x).logits.float()
                total += float(F.cross_entropy(logits[:, :-1].flatten(0, 1), x[:, 1:].flatten(), reduction="sum"))
        return total, int(ids.shape[0]) * (int(ids.shape[1]) - 1)


class Llama31Text(TextDecoder):
    """Llama 3.1 8B's architecture (grouped-query attention, RoPE with llama3 scaling, SwiGLU, RMSNorm)."""

    name = "llama3.1-8b-text"
    preset = "llama3.1-8b"
    mlperf_benchmark = "llama31_8b"
    source = (
        "llama3.1-8b (transformers LlamaForCausalLM, the preset at --scale; vocabulary = the tokenizer's) on .txt "
        "files in --data-dir, tokenized by its tokenizer.json else as UTF-8 bytes; sequences of 128 tokens (2048 at "
        "full scale); AdamW lr 3e-3 (3e-4 at full scale) betas (0.9, 0.95) decay 0.1, 2% warm-up, cosine to 0.1x; "
        "quality: validation cross-entropy per token (nats, lower is better)"
    )
