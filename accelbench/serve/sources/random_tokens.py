"""``random``: token ids drawn at the asked lengths, the source a run serves when it names none.

A decoder's speed depends on how many tokens it reads and writes, not which; each request's prompt is made
distinct (:class:`~.prefix.Salt`), so a server's prefix cache serves only the shared prefix asked for
(``--prefix-tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.errors import UsageError
from accelbench.params import opt
from accelbench.serve.sources.base import RunSettings, Source, Work
from accelbench.serve.sources.prefix import PrefixOptions, Salt, check_prefix, prefix_words, with_prefix


@dataclass(frozen=True)
class RandomOptions(PrefixOptions):
    input_jitter: float = opt(
        0.8, "random prompts are drawn from JITTER..1 x --input-tokens long (1: all the same)", sweep=False
    )

    def check(self) -> None:
        super().check()
        if not 0 < self.input_jitter <= 1:
            raise UsageError(f"--input-jitter must be in (0, 1], got {self.input_jitter:g}")


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
        prompts = draw_prompts(total, prompt_len, o.input_jitter, vocab)
        starts = [0] * total
        summary = None
        if o.prefix_tokens:
            made = with_prefix(prompts, o.prefix_tokens, o.prefix_share, o.prefix_groups, vocab)
            prompts, starts = made.prompts, made.starts
            summary = {"source": self.name, "prefix": made.summary}
        salt = Salt(starts, vocab) if params.mode != "accuracy" else None  # accuracy compares the same prompts
        return Work.single(prompts, [out] * total, summary, salt=salt, shared_prefix=bool(o.prefix_tokens))

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        return prefix_words(settings)
