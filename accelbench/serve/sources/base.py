"""Where a token run's requests come from: one source a run, each owning its settings.

A source turns its settings into the :class:`Work` a run serves: the prompts' token ids, each one's output tokens,
what the record keeps of them (``details.prompts``) and, for the sources whose requests LoadGen cannot schedule,
when each is sent. ``--source`` names it; left out, it is the source whose settings are given (``--prompts FILE``
alone is the file source), else random.

- ``random``: token ids drawn at the asked lengths. A decoder's speed depends on how many tokens it reads and
  writes, not which; each request's prompt is made distinct (:class:`~.prefix.Salt`), so a server's prefix cache
  serves only the shared prefix asked for.
- ``file``: a JSONL or ShareGPT file's prompts and answers (:mod:`.prompts`).
- ``mlperf``: MLPerf Inference's own processed data set for the model's benchmark (:mod:`.mlperf_data`).
- ``trace``: a timed trace's arrivals and lengths (:mod:`.traces`), replayed at its timestamps.
- ``conversations``: multi-turn conversations (:mod:`.conversations`), each turn sent after the previous answer
  with its history.

The first three are LoadGen's sample library; the last two are replayed by accelbench's own driver
(:mod:`.replay`), since LoadGen schedules its own arrivals and issues samples independently. ``--prefix-tokens``
puts a shared prefix before the random or file prompts (:mod:`.prefix`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from accelbench.errors import UsageError
from accelbench.params import NoOptions, opt, positive

if TYPE_CHECKING:
    from accelbench.serve.sources.conversations import ConversationSet
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


@dataclass(frozen=True)
class Work:
    """What a token run serves: the prompts' tokens, each one's output tokens, and where they came from."""

    prompts: list[list[int]]
    outs: list[int]
    summary: dict[str, Any] | None = None  # details.prompts (None: random prompts, nothing more to say)
    tokenizer: Any = None
    references: list[str | None] | None = None
    #: makes each request's prompt distinct past its shared prefix (None: sent as they are)
    salt: "Salt | None" = None
    #: seconds from the run's start at which each prompt is sent (a trace); None: LoadGen's schedule
    arrivals: list[float] | None = None
    #: conversations whose turns are sent after their answers (the prompts are their first turns)
    conversations: "ConversationSet | None" = None

    @property
    def longest(self) -> int:
        """Prompt and output tokens of the longest request (a conversation's last turn holds its whole history)."""
        longest = max(len(p) + o for p, o in zip(self.prompts, self.outs, strict=True))
        if self.conversations is not None:
            for c in self.conversations.conversations:
                history = sum(len(t.user) + t.answer_tokens for t in c.turns)
                longest = max(longest, history)
        return longest

    @property
    def shares_prefixes(self) -> bool:
        """The requests share prefixes on purpose: a shared prefix, a trace's shared blocks, conversations."""
        summary = self.summary or {}
        return bool(summary.get("prefix") or summary.get("shared_fraction") or self.conversations is not None)

    @property
    def replayed(self) -> bool:
        """Sent by accelbench's own driver, not LoadGen (arrivals or turns LoadGen cannot express)."""
        return self.arrivals is not None or self.conversations is not None


@dataclass(frozen=True)
class PrefixOptions(NoOptions):
    prefix_tokens: int = opt(
        0,
        "random and file prompts: a shared prefix of this many tokens (a system prompt) begins the prompts of "
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


@dataclass(frozen=True)
class RandomOptions(PrefixOptions):
    input_jitter: float = opt(
        0.8, "random prompts are drawn from JITTER..1 x --input-tokens long (1: all the same)", sweep=False
    )

    def check(self) -> None:
        super().check()
        if not 0 < self.input_jitter <= 1:
            raise UsageError(f"--input-jitter must be in (0, 1], got {self.input_jitter:g}")


@dataclass(frozen=True)
class TemplateOptions(NoOptions):
    chat_template: str = opt(
        "auto", "prompts read from a file: wrap each in the tokenizer's chat template: auto, on, off", sweep=False
    )

    def check(self) -> None:
        if self.chat_template not in ("auto", "on", "off"):
            raise UsageError(f"--chat-template is auto, on or off, not {self.chat_template!r}")

    @property
    def template(self) -> bool | None:
        return {"auto": None, "on": True, "off": False}[self.chat_template]


@dataclass(frozen=True)
class FileOptions(PrefixOptions, TemplateOptions):
    prompts: str = opt(
        "",
        'a JSONL ({"prompt": ..., "output": ...} a line) or ShareGPT file, tokenized by --checkpoint\'s tokenizer; '
        "a sample with a reference answer generates its length",
        sweep=False,
        metavar="FILE",
    )

    def check(self) -> None:
        PrefixOptions.check(self)
        TemplateOptions.check(self)


@dataclass(frozen=True)
class MlperfOptions(NoOptions):
    mlperf_data: str = opt(
        "",
        "a folder holding MLPerf Inference's processed data set for the model's benchmark (llama3.1-8b: "
        "cnn_eval.json): its prompts, its output lengths and, served whole, its accuracy targets",
        sweep=False,
        metavar="DIR",
    )


@dataclass(frozen=True)
class TraceOptions(NoOptions):
    trace: str = opt(
        "",
        "a timed trace replayed at its timestamps: JSONL of timestamp (s), input_tokens, output_tokens a line, a "
        "Mooncake trace (shared hash_ids become shared prompt blocks) or an Azure LLM inference trace CSV",
        sweep=False,
        metavar="FILE",
    )
    trace_speed: float = opt(1.0, "--trace: replay this many times faster than recorded", sweep=False)

    def check(self) -> None:
        if self.trace_speed <= 0:
            raise UsageError(f"--trace-speed must be above 0, got {self.trace_speed:g}")


@dataclass(frozen=True)
class ConversationOptions(TemplateOptions):
    conversations: str = opt(
        "",
        "a ShareGPT file whose whole conversations are served turn by turn, each turn after the previous answer "
        "with its history (empty with --source conversations: synthetic ones of --turns turns)",
        sweep=False,
        metavar="FILE",
    )
    turns: int = opt(4, "conversations: turns of each synthetic one, the most kept of each file's", sweep=False)
    think_ms: float = opt(0.0, "conversations: a user's think time between an answer and the next turn", sweep=False)

    def check(self) -> None:
        super().check()
        positive("--turns", self.turns)
        if self.think_ms < 0:
            raise UsageError(f"--think-ms must not be negative, got {self.think_ms:g}")


class Source:
    """A way of making a run's requests (the built-ins: :data:`SOURCES`)."""

    name: ClassVar[str]
    Options: ClassVar[type[NoOptions]] = NoOptions
    #: sent by accelbench's own driver (:mod:`.replay`), not LoadGen
    replayed: ClassVar[bool] = False

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


def _check_prefix(params: RunSettings, options: PrefixOptions) -> None:
    if options.prefix_tokens and params.mode == "accuracy":
        raise UsageError("--prefix-tokens changes the prompts the answers are judged on: leave it out of accuracy runs")


class RandomSource(Source):
    name = "random"
    Options = RandomOptions

    @classmethod
    def check_run(cls, params: RunSettings, options: RandomOptions) -> None:
        _check_prefix(params, options)
        from accelbench.serve.limits import lengths

        prompt_len = lengths(params)[0]
        if options.prefix_tokens >= prompt_len:
            raise UsageError(
                f"--prefix-tokens {options.prefix_tokens} must be under the prompt's {prompt_len} tokens "
                "(--input-tokens): the shared prefix is part of each random prompt"
            )

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        from accelbench.serve.limits import draw_prompts
        from accelbench.serve.sources.prefix import Salt, with_prefix

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
        return Work(prompts, [out] * total, summary, salt=salt)

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        return _prefix_words(settings)


def _prefix_words(settings: dict[str, Any]) -> list[str]:
    """A shared prefix as a description names it ("prefix 64x0.75"; none without one)."""
    tokens = int(settings.get("prefix_tokens") or 0)
    if not tokens:
        return []
    share, groups = float(settings.get("prefix_share", 1.0)), int(settings.get("prefix_groups", 1))
    return [f"prefix {tokens}x{share:g}" + (f" in {groups}" if groups > 1 else "")]


class FileSource(Source):
    name = "file"
    Options = FileOptions

    @classmethod
    def check_run(cls, params: RunSettings, options: FileOptions) -> None:
        _check_prefix(params, options)
        if not options.prompts:
            raise UsageError("--source file reads --prompts FILE: give the file")
        if not params.tokenizer_dir:
            raise UsageError("--prompts needs --checkpoint DIR: its tokenizer turns the prompts into tokens")
        file = Path(options.prompts).expanduser()
        if not file.is_file():
            what = "is a folder" if file.is_dir() else "does not exist"
            raise UsageError(f"prompt file {options.prompts} {what}: give a JSONL or ShareGPT JSON file")
        from accelbench.serve.limits import DEFAULT_LENGTHS
        from accelbench.serve.sources.prompts import from_params, record_noun

        default_out = DEFAULT_LENGTHS["tiny" if params.scale == "tiny" else "full"][1]
        # a bad file: one line; one with rows skipped says how many and where, once, before anything runs
        read = from_params(params, options, params.output_tokens or default_out, _library(params))[1]
        tell_skipped(read.summary.to_dict(), record_noun(read.summary.format))

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        from accelbench.serve.sources.prompts import from_params

        o: FileOptions = self.options
        tokenizer, read = from_params(params, o, lengths[1], total)
        samples = read.samples
        prompts = [s.prompt for s in samples]
        outs = [max(s.output_tokens, 2) for s in samples]  # a second token: TPOT needs one
        summary: dict[str, Any] = {"source": self.name, **read.summary.to_dict()}
        if o.prefix_tokens:
            from accelbench.serve.sources.prefix import with_prefix

            made = with_prefix(
                prompts, o.prefix_tokens, o.prefix_share, o.prefix_groups, vocab, keep=tokenizer.bos_token_id,
                replace=False,
            )  # fmt: skip
            prompts, summary["prefix"] = made.prompts, made.summary
        return Work(prompts, outs, summary, tokenizer, [s.reference for s in samples])

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        return [f"prompts {Path(str(settings.get('prompts', ''))).name}", *_prefix_words(settings)]


class MlperfSource(Source):
    name = "mlperf"
    Options = MlperfOptions

    @classmethod
    def check_run(cls, params: RunSettings, options: MlperfOptions) -> None:
        if not options.mlperf_data:
            raise UsageError("--source mlperf reads --mlperf-data DIR: give the folder of MLPerf's processed data set")
        from accelbench.serve.limits import preset_of
        from accelbench.serve.sources.mlperf_data import find, needs

        preset = preset_of(params.model)
        needs(preset.mlperf)  # a benchmark whose data set accelbench does not read: one line naming those it does
        if not preset.mlperf_own:
            raise UsageError(
                f"{params.model} has no MLPerf benchmark of its own ({preset.mlperf}'s data set is tokenized for "
                f"another model): serve {preset.mlperf}'s model, or its prompts as text with --prompts"
            )
        find(options.mlperf_data, preset.mlperf)  # a folder without the benchmark's file: one line naming it

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        from accelbench.serve.limits import preset_of
        from accelbench.serve.quality import MLPERF_REFERENCE
        from accelbench.serve.sources.mlperf_data import read_mlperf
        from accelbench.serve.sources.prompts import load_tokenizer

        o: MlperfOptions = self.options
        tokenizer = load_tokenizer(params.tokenizer_dir) if params.tokenizer_dir else None
        benchmark = preset_of(params.model).mlperf
        limit = None if params.profile == "official" else total
        read = read_mlperf(o.mlperf_data, benchmark, tokenizer, limit=limit, max_output_tokens=params.output_tokens)
        samples = read.samples
        top = max(max(s.prompt) for s in samples)
        if top >= vocab:
            raise UsageError(
                f"the data set's token ids reach {top}, past the served model's vocabulary of {vocab}: serve the "
                "model at full scale (its real tokenizer's vocabulary)"
            )
        outs = [max(s.output_tokens, 2) for s in samples]
        summary: dict[str, Any] = {"source": self.name, **read.summary.to_dict()}
        reference = MLPERF_REFERENCE.get(benchmark)
        if reference is not None:  # MLPerf's accuracy target: for the whole set only (--accuracy-target mlperf)
            summary["mlperf_accuracy_target"] = {
                "values": dict(reference.values),
                "source": reference.source,
                "applies": bool(summary.get("served_whole")),
            }
        return Work([s.prompt for s in samples], outs, summary, tokenizer, [s.reference for s in samples])

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        return ["mlperf data"]


class TraceSource(Source):
    name = "trace"
    Options = TraceOptions
    replayed = True

    @classmethod
    def check_run(cls, params: RunSettings, options: TraceOptions) -> None:
        if not options.trace:
            raise UsageError("--source trace replays --trace FILE: give the file")
        from accelbench.serve.sources.traces import read_trace

        read_trace(Path(options.trace).expanduser(), speed=options.trace_speed)  # a bad trace: one line, before load

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        from accelbench.serve.sources.traces import read_trace, shared_fraction, synthesize

        o: TraceOptions = self.options
        trace = read_trace(Path(o.trace).expanduser(), speed=o.trace_speed)
        prompts = synthesize(trace, vocab)
        outs = [max(r.output_tokens, 2) for r in trace.rows]
        summary = {"source": self.name, **trace.to_dict(), "speed": o.trace_speed}
        summary["shared_fraction"] = shared_fraction(trace)
        return Work(prompts, outs, summary, arrivals=[r.at for r in trace.rows])

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        speed = float(settings.get("trace_speed", 1.0))
        return [f"trace {Path(str(settings.get('trace', ''))).name}" + (f" x{speed:g}" if speed != 1 else "")]


class ConversationSource(Source):
    name = "conversations"
    Options = ConversationOptions
    replayed = True

    @classmethod
    def check_run(cls, params: RunSettings, options: ConversationOptions) -> None:
        if options.conversations:
            file = Path(options.conversations).expanduser()
            if not file.is_file():
                raise UsageError(f"conversation file {options.conversations} does not exist: give a ShareGPT file")
            if not params.tokenizer_dir:
                raise UsageError("--conversations needs --checkpoint DIR: its tokenizer turns the turns into tokens")
            work = cls(options).work(params, 0, _library(params), _lengths(params))  # read as the run will: one line
            tell_skipped(work.summary or {}, "conversations")

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        from accelbench.serve.sources import conversations as conv

        o: ConversationOptions = self.options
        tokenizer = None
        if o.conversations:
            from accelbench.serve.sources.prompts import load_tokenizer

            tokenizer = load_tokenizer(params.tokenizer_dir)
            read = conv.read_conversations(
                Path(o.conversations).expanduser(), tokenizer, output_tokens=lengths[1],
                max_output_tokens=params.output_tokens, max_turns=o.turns, chat_template=o.template, limit=total,
            )  # fmt: skip
            from accelbench.serve.sources.prompts import check_broken

            check_broken(read.summary, "conversations", "conversation file")
        else:
            read = conv.synthetic_conversations(total, o.turns, lengths[0], lengths[1], max(vocab, 2))
        firsts = [c.turns[0] for c in read.conversations]
        summary = {"source": self.name, **read.summary, "think_ms": o.think_ms}
        return Work(
            [t.user for t in firsts], [max(t.answer_tokens, 2) for t in firsts], summary, tokenizer,
            conversations=read,
        )  # fmt: skip

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        name = Path(str(settings.get("conversations") or "")).name
        return [f"conversations {name}" if name else f"conversations of {settings.get('turns', 4)} turns"]


#: the skip lines said in this process: a run's parameters are checked several times before it starts (its entry,
#: its plan, its estimate), and each check reads the file again
_TOLD: set[str] = set()


def tell_skipped(summary: dict[str, Any], noun: str) -> None:
    """Say on the console (standard error) the rows a file's reader passed over and where, once a process: the
    parameters' check reads the file before anything runs, so the line comes before the run's progress, and a
    worker's check writes it to the entry's log. The record keeps the counts (``details.prompts.skipped``)."""
    from accelbench.serve.sources.prompts import skipped_line

    line = skipped_line(summary, noun)
    if line is None:
        return
    line = f"accelbench: {summary.get('file')}: {line}"
    if line not in _TOLD:
        _TOLD.add(line)
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _library(params: RunSettings) -> int:
    from accelbench.infer.loadgen_params import QSL_SAMPLES

    return QSL_SAMPLES[params.profile]


def _lengths(params: RunSettings) -> tuple[int, int]:
    from accelbench.serve.limits import lengths

    return lengths(params)


#: the built-in sources, by name (``--source``)
SOURCES: dict[str, type[Source]] = {
    s.name: s for s in (RandomSource, FileSource, MlperfSource, TraceSource, ConversationSource)
}


def source_class(name: str) -> type[Source]:
    """A source by name, or one line naming the built-ins."""
    from accelbench.params import check_choice

    return SOURCES[check_choice("source", name, tuple(SOURCES))]
