"""``random``: token ids drawn at the asked lengths, the source a run serves when it names none.

A decoder's speed depends on how many tokens it reads and writes, not which. Each prompt is made distinct
(:class:`~.prefix.Salt`), so a prefix cache serves only the prefix asked for; where the run names a tokenizer, the
ids are drawn from what a text can hold (:class:`~.tokenizer.Writable`), so a server that counts the text's tokens
again reads the prompt lengths the run records.
"""

from __future__ import annotations

from dataclasses import dataclass
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
from accelbench.serve.sources.tokenizer import Writable, writable

if TYPE_CHECKING:
    pass

#: tokens :class:`~.prefix.Salt` writes at a prompt's first token of its own
SALT_TOKENS = 2


class RandomPrompts(Prompts, total=False):
    """``details.prompts`` of random prompts, written only where they begin with a shared prefix: what it is
    (random prompts alone have nothing more to say than the run's lengths)."""

    prefix: PrefixSummary


@dataclass(frozen=True)
class RandomOptions(PrefixOptions):
    input_jitter: float = opt(
        1.0,
        "prompts drawn from JITTER..1 x --input-tokens long (1: all that long, as vLLM's bench serve "
        "--dataset-name random and AIPerf send; under 1 the label says so)",
        sweep=False,
    )

    def check(self) -> None:
        super().check()
        if not 0 < self.input_jitter <= 1:
            raise UsageError(f"--input-jitter must be in (0, 1], got {self.input_jitter:g}")


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
    chooses_lengths = False

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
            prompts = ids.sendable(prompts)
        if params.mode != "accuracy":  # accuracy compares the same prompts
            salt = WrittenSalt(starts, ids) if ids is not None else Salt(starts, vocab)
        return Work.single(prompts, [out] * total, summary, salt=salt, shared_prefix=bool(o.prefix_tokens))

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        return jitter_words(settings) + prefix_words(settings)


def jitter_words(settings: dict[str, Any]) -> list[str]:
    """Prompts drawn shorter than ``--input-tokens`` as a description names them ("prompts 0.8..1x": the lengths
    beside it are the longest, not every prompt's); none at the default, 1, where every prompt is that long."""
    jitter = float(settings.get("input_jitter", 1.0))
    return [f"prompts {jitter:g}..1x"] if jitter < 1 else []
