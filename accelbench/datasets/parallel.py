"""WMT-style parallel text from a local folder (one sentence per line, a pair on the same line of two files named by
language, as WMT's releases and MLPerf's references lay it out), and the subword vocabulary it is read with: the
folder's ``tokenizer.json``, else a BPE shared by both sides (as the references use) trained here before the clock
starts. Its Metaspace pre-tokenizer gives back the text's spacing, since BLEU scores the detokenized output
against the raw lines (docs/tta.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError

#: the evaluation splits looked for, in order: WMT English-German's test set first, as MLPerf evaluates on it
EVAL_SPLITS = ("newstest2014", "test", "valid")
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")


@dataclass
class ParallelText:
    """The two splits as raw sentence pairs, and where they came from."""

    train: tuple[list[str], list[str]]
    eval: tuple[list[str], list[str]]
    eval_split: str


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def eval_split(data_dir: Path, src: str, tgt: str) -> str | None:
    return next((s for s in EVAL_SPLITS if (data_dir / f"{s}.{src}").is_file()), None)


def check_parallel(data_dir: Path, src: str, tgt: str) -> str:
    """The evaluation split's name, after checking that every file is there and each pair of files has as many
    lines; a usage error names what to fix."""
    split = eval_split(data_dir, src, tgt)
    if split is None:
        wanted = " or ".join(f"{s}.{src}" for s in EVAL_SPLITS)
        raise UsageError(f"{data_dir} has no evaluation split: expected {wanted} beside its .{tgt} file")
    for name in ("train", split):
        a, b = data_dir / f"{name}.{src}", data_dir / f"{name}.{tgt}"
        for f in (a, b):
            if not f.is_file():
                raise UsageError(f"{data_dir} lacks {f.name}: parallel text is {name}.{src} and {name}.{tgt}")
        na, nb = len(_lines(a)), len(_lines(b))
        if na != nb:
            raise UsageError(f"{a.name} has {na} lines and {b.name} {nb}: each line is one sentence of a pair")
        if na == 0:
            raise UsageError(f"{a.name} is empty")
    return split


def read_parallel(data_dir: Path, src: str, tgt: str) -> ParallelText:
    split = check_parallel(data_dir, src, tgt)
    return ParallelText(
        (_lines(data_dir / f"train.{src}"), _lines(data_dir / f"train.{tgt}")),
        (_lines(data_dir / f"{split}.{src}"), _lines(data_dir / f"{split}.{tgt}")),
        split,
    )


def subword_tokenizer(data_dir: Path, text: ParallelText, vocab_size: int) -> Any:
    """The folder's ``tokenizer.json``, else BPE trained on the training text of both sides."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    given = data_dir / "tokenizer.json"
    if given.is_file():
        tok = Tokenizer.from_file(str(given))
        missing = [s for s in SPECIALS if tok.token_to_id(s) is None]
        if missing:
            raise UsageError(f"{given} lacks the special tokens {', '.join(missing)} (padding, unknown, start, end)")
        return tok
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False)
    tok.train_from_iterator([*text.train[0], *text.train[1]], trainer)
    return tok


def special_ids(tok: Any) -> tuple[int, int, int]:
    """(pad, start, end) ids of ``tok``."""
    return tok.token_to_id("<pad>"), tok.token_to_id("<s>"), tok.token_to_id("</s>")
