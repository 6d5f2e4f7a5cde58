"""Shared prefixes: the prompts that begin alike, and what a prefix cache could serve of what was sent.

Real traffic is full of beginnings a server's prefix cache serves (a system prompt, a few-shot block): never
repeating one measures a server at its worst, repeating whole prompts at a best no user sees. :func:`with_prefix`
sets the share that begins alike by the flags; :class:`Ledger` counts, in the order sent, what an ideal cache
(never evicting, blocks of :data:`BLOCK_TOKENS`) would serve: the hit rate *sent*, beside the one the server *served*.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypedDict

from accelbench.errors import UsageError
from accelbench.params import NoOptions, opt, positive
from accelbench.results.details import PrefixReuse

#: the tokens a cache block holds: vLLM's default KV block (``--block-size 16``), the unit its prefix cache reuses
BLOCK_TOKENS = 16


class PrefixSummary(TypedDict, total=False):
    """What a record says of the shared prefixes a source put before its prompts (``details.prompts.prefix`` of the
    random and file sources): their length, the share of the requests and the groups asked for, the requests that
    got one, where it was placed and how its tokens were drawn."""

    prefix_tokens: int
    prefix_share: float
    prefix_groups: int
    requests_with_prefix: int
    requests: int
    placed: str
    method: str


@dataclass(frozen=True)
class Prefixed:
    """Prompts after :func:`with_prefix`, and what a record says of the prefixes."""

    prompts: list[list[int]]
    summary: PrefixSummary
    #: each prompt's first token of its own (after its BOS and shared prefix): where :class:`Salt` makes it distinct
    starts: list[int]


def with_prefix(
    prompts: Sequence[list[int]],
    tokens: int,
    share: float,
    groups: int,
    vocab: int,
    *,
    seed: int = 1,
    keep: int | None = None,
    replace: bool = True,
    written: Callable[[list[int]], list[int]] | None = None,
) -> Prefixed:
    """``prompts`` with a shared prefix: the first ``round(share * len(prompts))`` of an order shuffled by ``seed``
    begin with one of ``groups`` prefixes of ``tokens`` random ids (in turn), the rest are unchanged.

    ``replace``: the prefix takes the place of a prompt's first tokens (a random prompt keeps its length, and a token
    of its own); else it goes in front. ``keep``: a token left before the prefix where a prompt begins with it (the
    BOS). ``written``: how a drawn prefix is written in a tokenizer's ordinary tokens (:class:`~.tokenizer.Writable`).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    prefixes = [rng.integers(1, vocab, size=tokens).tolist() for _ in range(groups)]
    if written is not None:
        prefixes = [written(p) for p in prefixes]
    order = rng.permutation(len(prompts))
    sharing = int(round(share * len(prompts)))
    out = [list(p) for p in prompts]
    starts = [0] * len(out)
    for rank, i in enumerate(order[:sharing]):
        prefix = prefixes[rank % groups]
        prompt = out[i]
        head = 1 if keep is not None and prompt and prompt[0] == keep else 0
        rest = prompt[head:]
        if replace:
            rest = rest[tokens:] or rest[-1:]  # a prompt shorter than the prefix keeps one token of its own
        out[i] = prompt[:head] + prefix + rest
        starts[i] = head + tokens
    summary: PrefixSummary = {
        "prefix_tokens": tokens,
        "prefix_share": share,
        "prefix_groups": groups,
        "requests_with_prefix": sharing,
        "requests": len(prompts),
        "placed": "in place of each prompt's first tokens (its length kept)" if replace else "before each prompt",
        "method": f"random {'ordinary tokens of the tokenizer' if written else 'token ids'} (seed {seed}), one of "
        f"{groups} prefix{'es' * (groups > 1)} in turn",
    }
    return Prefixed(out, summary, starts)


def block_chain(prompt: Sequence[int], block: int = BLOCK_TOKENS) -> list[int]:
    """The hashes of a prompt's whole blocks, each of its own tokens and every block before it (a block is reused
    only after the same beginning, as a prefix cache keys it)."""
    chain: list[int] = []
    previous = 0
    for start in range(0, len(prompt) - block + 1, block):
        previous = hash((previous, tuple(prompt[start : start + block])))
        chain.append(previous)
    return chain


class Ledger:
    """What an ideal prefix cache would have served of the prompts sent, in the order they were sent.

    Each sample's block chain is computed once (LoadGen sends a sample many times); :meth:`sent` walks a chain
    while its blocks are known, then adds the rest. Thread-safe: LoadGen's issue thread and a replay driver call it."""

    def __init__(self, prompts: Sequence[Sequence[int]], block: int = BLOCK_TOKENS) -> None:
        self.prompts = prompts
        self.block = block
        self._chains: dict[int, list[int]] = {}
        self._seen: set[int] = set()
        self._lock = threading.Lock()
        self.requests = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0

    def sent(self, index: int, prompt: Sequence[int]) -> int:
        """Count a request of ``prompt`` (sample ``index``'s own list, whose chain is kept, or any other: a salted
        prompt, a conversation's turn); the tokens an ideal cache would serve of it."""
        own = 0 <= index < len(self.prompts) and prompt is self.prompts[index]
        chain = self._chain(index) if own else block_chain(prompt, self.block)
        return self._count(chain, len(prompt))

    def sent_salted(self, index: int, tokens: int, start: int) -> int:
        """Count a request of sample ``index`` made distinct from token ``start`` on (:class:`Salt`): only its
        blocks before ``start`` can be known, and they are the sample's own, whose chain is kept (hashing every
        salted prompt whole cost 21 us a request at 1,024 tokens)."""
        return self._count(self._chain(index)[: max(start, 0) // self.block], tokens)

    def _count(self, chain: list[int], tokens: int) -> int:
        with self._lock:
            hits = 0
            for h in chain:
                if h not in self._seen:
                    break
                hits += 1
            self._seen.update(chain[hits:])
            self.requests += 1
            self.prompt_tokens += tokens
            self.cached_tokens += hits * self.block
        return hits * self.block

    def _chain(self, index: int) -> list[int]:
        chain = self._chains.get(index)
        if chain is None:
            chain = self._chains[index] = block_chain(self.prompts[index], self.block)
        return chain

    def report(self) -> PrefixReuse:
        """The hit rate the requests sent offered, and how it is counted."""
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "hit_rate": self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None,
            "block_tokens": self.block,
            "method": f"prompt tokens in whole blocks of {self.block} that an earlier request sent after the same "
            "beginning (an unbounded cache that never evicts), in the order they were sent; a sample sent again "
            "counts whole",
        }

    def shaper(self, salt: "Salt | None") -> "Callable[[int, list[int]], list[int]]":
        """What is done to each prompt as it is sent: made distinct by ``salt`` (where the source asks), then
        counted here."""

        def shape(index: int, prompt: list[int]) -> list[int]:
            if salt is None:
                self.sent(index, prompt)
                return prompt
            sent = salt(index, prompt)
            self.sent_salted(index, len(sent), salt.start(index, prompt))
            return sent

        return shape

    def reset(self) -> None:
        """Start a fresh count (a run after the probe): what was sent stays known, as the server's cache keeps it."""
        with self._lock:
            self.requests = self.prompt_tokens = self.cached_tokens = 0


class Salt:
    """Each request's prompt made its own where the source asked for distinct prompts: LoadGen sends each sample of its
    library many times, and a server's prefix cache would serve a repeated prompt whole. Two tokens at a sample's first
    token of its own are replaced by a count of the requests sent, starting where chance puts it so two runs differ."""

    def __init__(self, starts: Sequence[int], vocab: int, offset: int | None = None) -> None:
        import secrets

        self.starts = starts
        self.span = max(vocab - 1, 1)
        #: where this run's count starts: drawn afresh each run, so a rerun against the same server sends other
        #: prompts than the run before it, whose prompts the server's cache still holds (a second run of the same
        #: prompts against the stub's cache was served 99.3% from it)
        self._count = secrets.randbelow(self.span * self.span) if offset is None else offset
        self._lock = threading.Lock()

    def start(self, index: int, prompt: list[int]) -> int:
        """Where sample ``index``'s prompt is made distinct (-1: an empty prompt, left as it is)."""
        return min(self.starts[index], len(prompt) - 1)

    def __call__(self, index: int, prompt: list[int]) -> list[int]:
        with self._lock:
            self._count += 1
            n = self._count
        at = self.start(index, prompt)
        if at < 0:
            return prompt
        salt = [1 + n % self.span, 1 + (n // self.span) % self.span][: len(prompt) - at]
        return prompt[:at] + salt + prompt[at + len(salt) :]


@dataclass(frozen=True)
class PrefixOptions(NoOptions):
    prefix_tokens: int = opt(
        0,
        "a shared prefix of this many tokens (a system prompt) begins the prompts of "
        "--prefix-share of the requests (0: none); a random prompt keeps its length, a file's gets it in front",
        sweep=False,
    )
    prefix_share: float = opt(1.0, "the fraction of requests whose prompt begins with a shared prefix", sweep=False)
    prefix_groups: int = opt(1, "distinct shared prefixes, the requests that share split among them", sweep=False)

    def check(self) -> None:
        if self.prefix_tokens < 0:
            raise UsageError(f"--prefix-tokens must not be negative, got {self.prefix_tokens}")
        if not 0 <= self.prefix_share <= 1:
            raise UsageError(f"--prefix-share is a fraction of the requests, in [0, 1], got {self.prefix_share:g}")
        positive("--prefix-groups", self.prefix_groups)
        if not self.prefix_tokens and (self.prefix_share != 1.0 or self.prefix_groups != 1):
            raise UsageError("--prefix-share and --prefix-groups shape a shared prefix: give --prefix-tokens N")


def check_prefix(mode: str, options: PrefixOptions) -> None:
    """A shared prefix changes the prompts an accuracy run judges: refused in that ``mode``."""
    if options.prefix_tokens and mode == "accuracy":
        raise UsageError("--prefix-tokens changes the prompts the answers are judged on: leave it out of accuracy runs")


def prefix_words(settings: dict[str, Any]) -> list[str]:
    """A shared prefix as a description names it ("prefix 64x0.75"; none without one)."""
    tokens = int(settings.get("prefix_tokens") or 0)
    if not tokens:
        return []
    share, groups = float(settings.get("prefix_share", 1.0)), int(settings.get("prefix_groups", 1))
    return [f"prefix {tokens}x{share:g}" + (f" in {groups}" if groups > 1 else "")]
