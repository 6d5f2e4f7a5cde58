"""``random``: token ids drawn at the asked lengths, the source a run serves when it names none.

A decoder's speed depends on how many tokens it reads and writes, not which; each request's prompt is made
distinct (:class:`~.prefix.Salt`), so a server's prefix cache serves only the shared prefix asked for
(``--prefix-tokens``).

Where the run names a tokenizer (an endpoint's ``--tokenizer``, a checkpoint's), the ids are drawn from what a text
can hold (:class:`Writable`): a server is sent each prompt as text and counts its tokens again, so a drawn special
token (BOS, EOS, pad: dropped from the text) or two tokens whose text the tokenizer reads as one would have the
server read another prompt length than the run records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from accelbench.errors import UsageError
from accelbench.params import opt
from accelbench.results.details import Prompts
from accelbench.serve.sources.base import RunSettings, Source, Work
from accelbench.serve.sources.prefix import (
    PrefixOptions,
    PrefixSummary,
    Salt,
    check_prefix,
    prefix_words,
    with_prefix,
)

if TYPE_CHECKING:
    import numpy as np

#: rounds of decoding a prompt and encoding its text again before it is left as it came out (each round keeps
#: what the tokenizer read back, cut or filled to the drawn length; two settled each of 300 prompts of 1,024 tokens
#: of a byte-level BPE)
SETTLE_ROUNDS = 10
#: what a tokenizer decodes a character's bytes cut short as (the replacement character)
BROKEN = "\ufffd"
#: tokens :class:`~.prefix.Salt` writes at a prompt's first token of its own
SALT_TOKENS = 2


class RandomPrompts(Prompts, total=False):
    """``details.prompts`` of random prompts, written only where they begin with a shared prefix: what it is
    (random prompts alone have nothing more to say than the run's lengths)."""

    prefix: PrefixSummary


@dataclass(frozen=True)
class RandomOptions(PrefixOptions):
    input_jitter: float = opt(
        0.8, "random prompts are drawn from JITTER..1 x --input-tokens long (1: all the same)", sweep=False
    )

    def check(self) -> None:
        super().check()
        if not 0 < self.input_jitter <= 1:
            raise UsageError(f"--input-jitter must be in (0, 1], got {self.input_jitter:g}")


class Writable:
    """The token ids a prompt's text can hold: the tokenizer's vocabulary (below the run's ``vocab``) less its
    special tokens, which a text sent to a server never carries (decoded with ``skip_special_tokens`` they vanish),
    and less the pieces of a character a byte-level tokenizer has (alone they decode as U+FFFD, which reads back as
    three tokens).

    Draws stay uniform and seeded as without a tokenizer: ids ``1..len(ids)`` are drawn (:attr:`vocab`) and each is
    written as the ordinary token it stands for (:meth:`written`), one to one, so prompts that differed, or shared
    a prefix, still do."""

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


def writable(params: RunSettings, vocab: int) -> Writable | None:
    """The run's tokenizer's :class:`Writable` ids, where the run names a folder with a tokenizer (None: ids are
    drawn from ``1..vocab-1``, as a model built here reads them)."""
    from accelbench.serve.sources.prompts import TOKENIZER_FILES, load_tokenizer

    folder = params.tokenizer_dir
    if not folder or not any((Path(folder).expanduser() / name).is_file() for name in TOKENIZER_FILES):
        return None
    return Writable(load_tokenizer(folder), vocab)


class WrittenSalt(Salt):
    """:class:`~.prefix.Salt` whose count is written in ordinary tokens (its ids ``1..vocab-1`` stand for
    :attr:`Writable.ids`, one to one), so a salted prompt keeps its text's token count and stays distinct."""

    def __init__(self, starts: Sequence[int], ids: Writable, offset: int | None = None) -> None:
        super().__init__(starts, ids.vocab, offset)
        self.ids = ids

    def __call__(self, index: int, prompt: list[int]) -> list[int]:
        salted = super().__call__(index, prompt)
        at = self.start(index, prompt)
        if at < 0:
            return salted
        end = min(at + SALT_TOKENS, len(salted))
        return salted[:at] + self.ids.written(salted[at:end]) + salted[end:]


class RandomSource(Source):
    name = "random"
    Options = RandomOptions

    @classmethod
    def check_run(cls, params: RunSettings, options: RandomOptions) -> None:
        check_prefix(params.mode, options)
        from accelbench.serve.limits import lengths

        prompt_len = lengths(params)[0]
        if options.prefix_tokens >= prompt_len:
            raise UsageError(
                f"--prefix-tokens {options.prefix_tokens} must be under the prompt's {prompt_len} tokens "
                "(--input-tokens): the shared prefix is part of each random prompt"
            )

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        from accelbench.serve.limits import draw_prompts

        o: RandomOptions = self.options
        prompt_len, out = lengths
        ids = writable(params, vocab)
        drawn = ids.vocab if ids is not None else vocab
        prompts = draw_prompts(total, prompt_len, o.input_jitter, drawn)
        starts = [0] * total
        summary: RandomPrompts | None = None
        if o.prefix_tokens:
            made = with_prefix(prompts, o.prefix_tokens, o.prefix_share, o.prefix_groups, drawn)
            prompts, starts = made.prompts, made.starts
            summary = {"source": self.name, "prefix": made.summary}
        salt: Salt | None = None
        if ids is not None:
            import numpy as np

            rng = np.random.default_rng(2)
            prompts = [ids.settled(ids.written(p), rng) for p in prompts]
        if params.mode != "accuracy":  # accuracy compares the same prompts
            salt = WrittenSalt(starts, ids) if ids is not None else Salt(starts, vocab)
        return Work.single(prompts, [out] * total, summary, salt=salt, shared_prefix=bool(o.prefix_tokens))

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        return prefix_words(settings)
