"""Where a serving run's requests come from: the seam every source shares, and the built-ins by name.

A source turns its settings (its ``Options``, flags of ``accelbench infer``) into the :class:`Work` a run serves:
the prompts' token ids, each one's output tokens, what the record keeps of them and, for a source LoadGen cannot
schedule (:attr:`Source.replayed`), when each is sent. The built-ins are :data:`SOURCES`, each in a module of its
own; a user's is a ``package.module:Class`` given to ``--source``, as a user's engine is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from accelbench.errors import UsageError
from accelbench.params import NoOptions
from accelbench.results.details import Prompts

if TYPE_CHECKING:
    from accelbench.serve.sources.prefix import Salt


class RunSettings(Protocol):
    """What a source reads of the run's settings (an ``infer/llm`` run's parameters), so sources know nothing
    else of the run."""

    @property
    def model(self) -> str: ...
    @property
    def scale(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def profile(self) -> str: ...
    @property
    def input_tokens(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def tokenizer_dir(self) -> str: ...


#: who sends a run's requests: LoadGen on its own schedule (all at once, Poisson arrivals), or accelbench's own
#: driver (:mod:`accelbench.serve.replay`: a turn at its time, a turn after the answer before it)
Driver = Literal["loadgen", "accelbench"]


@dataclass(frozen=True)
class Turn:
    """One request of a conversation: the user's new tokens (the whole prompt on a first turn), the tokens to
    generate, the answer the source gave (None when it has none: a synthetic turn, an empty answer) and, for a
    first turn with a time of its own (a trace's row), the seconds from the run's start at which it is due."""

    user: list[int]
    answer_tokens: int
    reference: str | None = None
    at: float | None = None


@dataclass(frozen=True)
class Conversation:
    """A conversation's turns, in the order they are sent; a single request is a conversation of one turn."""

    turns: list[Turn]


@dataclass(frozen=True)
class ConversationSet:
    """The conversations to replay, in file order, and the summary a record keeps (``details.prompts``: the
    conversation source's own keys, :class:`~.conversations.ConversationPrompts`)."""

    conversations: list[Conversation]
    summary: Prompts

    @property
    def turns(self) -> int:
        """The turns of all the conversations: the requests a replay sends."""
        return sum(len(c.turns) for c in self.conversations)


@dataclass(frozen=True)
class Work:
    """What a token run serves, in one shape for every source: conversations of turns (a sample of LoadGen's library
    and a trace's row are conversations of one turn), who sends them (``driver``), what the record keeps of them
    (``summary``) and what the engine and the run are told (the tokenizer, the salt, a shared prefix on purpose).
    Build one with :meth:`single` (one turn each) or :meth:`talks` (conversations)."""

    requests: list[Conversation]
    driver: Driver = "loadgen"
    #: ``details.prompts``: the common keys, and each source's own as its TypedDict declares them beside it (None:
    #: random prompts, nothing more to say)
    summary: Prompts | None = None
    tokenizer: Any = None
    #: makes each request's prompt distinct past its shared prefix (None: sent as they are)
    salt: "Salt | None" = None
    #: the source made prompts begin alike on purpose (a shared prefix asked for, a trace's shared blocks), so a
    #: server's prefix cache is meant to serve them
    shared_prefix: bool = False

    @classmethod
    def single(
        cls,
        prompts: list[list[int]],
        outs: list[int],
        summary: Prompts | None = None,
        tokenizer: Any = None,
        references: list[str | None] | None = None,
        *,
        at: list[float] | None = None,
        salt: "Salt | None" = None,
        shared_prefix: bool = False,
    ) -> "Work":
        """Single requests: LoadGen's sample library, or (``at``: each one's time) a trace accelbench replays."""
        refs: list[str | None] = list(references) if references is not None else [None] * len(prompts)
        times: list[float | None] = list(at) if at is not None else [None] * len(prompts)
        requests = [
            Conversation([Turn(p, o, r, t)]) for p, o, r, t in zip(prompts, outs, refs, times, strict=True)
        ]  # fmt: skip
        driver: Driver = "accelbench" if at is not None else "loadgen"
        return cls(requests, driver, summary, tokenizer, salt, shared_prefix)

    @classmethod
    def talks(cls, conversations: list[Conversation], summary: Prompts, tokenizer: Any = None) -> "Work":
        """Conversations, each turn sent by accelbench's driver after the previous answer, with its history."""
        return cls(conversations, "accelbench", summary, tokenizer)

    @cached_property
    def firsts(self) -> list[Turn]:
        return [c.turns[0] for c in self.requests]

    @cached_property
    def prompts(self) -> list[list[int]]:
        """Each conversation's first prompt: LoadGen's library, the probe's prompts."""
        return [t.user for t in self.firsts]

    @cached_property
    def outs(self) -> list[int]:
        """Each first turn's output tokens (at least 2 for a conversation's: TPOT needs two)."""
        floor = 2 if self.conversations is not None else 0
        return [max(t.answer_tokens, floor) for t in self.firsts]

    @cached_property
    def references(self) -> list[str | None] | None:
        """Each first turn's answer from the source, where any has one (a prompt file's, MLPerf's data)."""
        refs = [t.reference for t in self.firsts]
        return refs if any(r is not None for r in refs) and self.driver == "loadgen" else None

    @cached_property
    def arrivals(self) -> list[float] | None:
        """Seconds from the run's start at which each request is due (a trace); None: no times of their own."""
        times = [t.at for t in self.firsts]
        return [float(t) for t in times if t is not None] if times and all(t is not None for t in times) else None

    @property
    def conversations(self) -> ConversationSet | None:
        """The conversations whose later turns wait for the answers before them (None: single requests)."""
        if self.driver != "accelbench" or self.arrivals is not None:
            return None
        return ConversationSet(self.requests, self.summary or {})

    @cached_property
    def longest(self) -> int:
        """Prompt and output tokens of the longest request (a conversation's last turn holds its whole history)."""
        return max(sum(len(t.user) + t.answer_tokens for t in c.turns) for c in self.requests)

    @property
    def shares_prefixes(self) -> bool:
        """The requests share prefixes on purpose: a shared prefix, a trace's shared blocks, or conversations (each
        turn's prompt holds the history before it). The engine is told (``EngineSettings.shared_prefixes``)."""
        return self.shared_prefix or self.conversations is not None

    @property
    def replayed(self) -> bool:
        """Sent by accelbench's own driver, not LoadGen (arrivals or turns LoadGen cannot express)."""
        return self.driver == "accelbench"


class Source:
    """A way of making a run's requests (the built-ins: :data:`SOURCES`)."""

    name: ClassVar[str]
    #: a few words ``--source``'s help says of it, after its name (the flag that gives its file)
    about: ClassVar[str] = ""
    Options: ClassVar[type[NoOptions]] = NoOptions
    #: sent by accelbench's own driver (:mod:`.replay`), not LoadGen
    replayed: ClassVar[bool] = False
    #: the requests' lengths are the source's own (a file's, a trace's), so a record states their means; False:
    #: the run's flags set them (random prompts, a shared prefix among them), and the record states what was asked
    chooses_lengths: ClassVar[bool] = True

    def __init__(self, options: Any) -> None:
        self.options = options

    @classmethod
    def check_run(cls, params: RunSettings, options: Any) -> None:
        """Raise a UsageError for what this source cannot serve in this run (nothing by default)."""

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        raise NotImplementedError

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        """How a record's one-line description names the source (none for random prompts)."""
        return [cls.name]


def library_size(params: RunSettings) -> int:
    """The samples LoadGen's library holds for the run's profile: what a source reads of a file at most."""
    from accelbench.loadgen.params import QSL_SAMPLES

    return QSL_SAMPLES[params.profile]


def asked_lengths(params: RunSettings) -> tuple[int, int]:
    """The prompt and output tokens the run asks for (its flags, else the scale's defaults)."""
    from accelbench.serve.limits import lengths

    return lengths(params)


#: the built-in sources, by name (``--source``), each in a module of its own, imported when chosen
SOURCES: dict[str, str] = {
    "random": "accelbench.serve.sources.random_tokens:RandomSource",
    "file": "accelbench.serve.sources.prompts:FileSource",
    "mlperf": "accelbench.serve.sources.mlperf_data:MlperfSource",
    "trace": "accelbench.serve.sources.traces:TraceSource",
    "conversations": "accelbench.serve.sources.conversations:ConversationSource",
}


def source_class(name: str) -> type[Source]:
    """A built-in source by name, one an installed package declares (:mod:`accelbench.plugins`), or a user's
    ``package.module:Class`` (a :class:`Source` subclass)."""
    from accelbench.plugins import load_class, with_installed

    if ":" in name:
        return load_class(name, Source, "source")
    known = with_installed("source", SOURCES)
    if name not in known:  # the way to add one is part of the answer, as for an engine
        import difflib

        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise UsageError(f"unknown source {name!r}: choose one of {', '.join(known)}, or package.module:Class{hint}")
    return load_class(str(known[name]), Source, "source")


def source_names() -> list[str]:
    """The sources by name, built-in and installed."""
    from accelbench.plugins import with_installed

    return list(with_installed("source", SOURCES))


def builtin_sources() -> dict[str, type[Source]]:
    """The sources by name, built-in and installed (their options are flags of ``accelbench infer``)."""
    return {name: source_class(name) for name in source_names()}
