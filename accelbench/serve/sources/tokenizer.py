"""The served model's tokenizer as the prompt sources use it: read from a checkpoint folder's own files, and the
token ids a prompt's text can hold.

A server is sent each prompt as text and counts its tokens again, so a drawn special token (BOS, EOS, pad: dropped
from the text) or two tokens whose text the tokenizer reads as one would have the server read another prompt
length than the run records: where the run names a tokenizer, synthetic prompts are drawn from its ordinary tokens
and settled (:class:`Writable`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from accelbench.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from accelbench.serve.sources.base import RunSettings

#: files that carry a tokenizer's vocabulary in a Hugging Face folder (fast, SentencePiece, BPE, WordPiece)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")
#: rounds of decoding a prompt and encoding its text again before it is left as it came out (each round keeps
#: what the tokenizer read back, cut or filled to the drawn length; two settled each of 300 prompts of 1,024 tokens
#: of a byte-level BPE)
SETTLE_ROUNDS = 10
#: what a tokenizer decodes a character's bytes cut short as (the replacement character)
BROKEN = "\ufffd"


def load_tokenizer(checkpoint: str | Path) -> Any:
    """The checkpoint folder's own tokenizer (a transformers tokenizer), from local files only.

    The checkpoint's, not a preset's: token ids only mean something to the model they were made for.
    """
    folder = Path(checkpoint).expanduser()
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder: give the save_pretrained folder that holds the tokenizer")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise UsageError(
            f"tokenizer folder {folder} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): "
            "save the tokenizer there with save_pretrained"
        )
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise UsageError(f"reading prompts needs transformers: pip install 'accelbench[llm]' ({e})") from e
    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as e:  # transformers raises OSError, ValueError, KeyError... for a broken folder
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"tokenizer folder {folder}: its tokenizer does not load: {first}") from e


class Writable:
    """The token ids a prompt's text can hold: the tokenizer's vocabulary (below the run's ``vocab``) less its special
    tokens, which a text sent to a server never carries, and less a byte-level tokenizer's pieces of a character (alone
    they decode as U+FFFD). Ids ``1..len(ids)`` are drawn, uniform and seeded as without a tokenizer (:attr:`vocab`),
    and each is written as the ordinary token it stands for (:meth:`written`), so prompts that differed still do."""

    def __init__(self, tokenizer: Any, vocab: int) -> None:
        special = {int(i) for i in tokenizer.all_special_ids}
        self.tokenizer = tokenizer
        ordinary = sorted(i for i in {int(i) for i in tokenizer.get_vocab().values()} - special if i < vocab)
        texts = tokenizer.batch_decode([[i] for i in ordinary])
        self.ids = [i for i, text in zip(ordinary, texts, strict=True) if BROKEN not in text]
        if not self.ids:
            raise UsageError("the tokenizer has no ordinary token (all are special): random prompts need some")

    @property
    def vocab(self) -> int:
        """The vocabulary to draw ids ``1..vocab-1`` from, each one standing for one of :attr:`ids`."""
        return len(self.ids) + 1

    def written(self, drawn: Sequence[int]) -> list[int]:
        """Drawn ids (``1..vocab-1``) as the tokenizer's ordinary ones."""
        ids = self.ids
        return [ids[t - 1] for t in drawn]

    def settled(self, prompt: list[int], rng: "np.random.Generator") -> list[int]:
        """``prompt`` as ids its own text is read back as, at its length: decoded, encoded again, cut or filled
        with drawn tokens, until the text holds exactly its tokens (:data:`SETTLE_ROUNDS` at most). A byte-level
        BPE reads two drawn tokens' text as one, or one as three: one of 8,000 tokens, trained on Python's standard
        library, read 128 drawn tokens back as 143.7 on average."""
        want, ids, tok = len(prompt), prompt, self.tokenizer
        for _ in range(SETTLE_ROUNDS):
            again = [int(i) for i in tok.encode(tok.decode(ids), add_special_tokens=False)]
            if again == ids:
                return ids
            keep = min(len(again), want)
            # a cut inside a character's bytes decodes as U+FFFD, whose own three bytes read back longer again
            while keep > 1 and tok.decode(again[:keep]).endswith(BROKEN):
                keep -= 1
            ids = again[:keep] + self.written(rng.integers(1, self.vocab, size=want - keep).tolist())
        return ids

    def sendable(self, drawn: list[list[int]], seed: int = 2) -> list[list[int]]:
        """Drawn prompts (ids ``1..vocab-1``) as the ordinary tokens they stand for, each settled to what its text
        reads back as (:meth:`settled`; seeded, so a run sends the same prompts every time)."""
        import numpy as np

        rng = np.random.default_rng(seed)
        return [self.settled(self.written(p), rng) for p in drawn]


def writable(params: RunSettings, vocab: int) -> Writable | None:
    """The run's tokenizer's :class:`Writable` ids, where the run names a folder with a tokenizer (None: ids are
    drawn from ``1..vocab-1``, as a model built here reads them)."""
    folder = params.tokenizer_dir
    if not folder or not any((Path(folder).expanduser() / name).is_file() for name in TOKENIZER_FILES):
        return None
    return Writable(load_tokenizer(folder), vocab)
