"""Parameters of a benchmark: typed dataclasses built from the CLI, a suite file or Python.

Every knob that can change a number is a field, so that it is validated in one
place, recorded with the result, and part of the key that ``--resume`` and
``compare`` match on. Invalid values raise UsageError before anything runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, Iterator, TypeVar

from accelbench.devices import check_device_name
from accelbench.errors import UsageError
from accelbench.measure.timer import TimerConfig

P = TypeVar("P", bound="CommonParams")


def opt(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] | None = None,
    flag: str | None = None,
    metavar: str | None = None,
    sweep: bool = True,
) -> Any:
    """A parameter field that also describes its command-line flag.

    The CLI builds each kernel's flags from these, so a knob is declared once:
    its type and default here, its words in ``--help``, its validation in
    ``validate()``. ``sweep`` fields accept comma lists on the command line.
    """
    return dataclasses.field(
        default=default,
        metadata={"help": help, "choices": choices, "flag": flag, "metavar": metavar, "sweep": sweep},
    )


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``; else a UsageError that suggests the likely intended one.

    ``fp16`` where autocast precisions are named ``amp_fp16`` is the common slip (kernels take
    plain dtypes, models autocast), and ``gpu`` where devices are named by their kind (``cuda``, ``xpu``;
    spelling alone would offer ``cpu``): name those rather than the nearest spelling.
    """
    if value in choices:
        return typing.cast(str, value)
    import difflib

    if f"amp_{value}" in choices:
        close = [f"amp_{value}"]
    elif str(value).lower() == "gpu" and (gpus := _gpu_kinds(choices)):
        close = gpus[:1]
    else:
        close = difflib.get_close_matches(str(value), choices, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise UsageError(f"unknown {name.replace('_', ' ')} {value!r}: choose one of {', '.join(choices)}{hint}")


def _gpu_kinds(choices: tuple[str, ...]) -> list[str]:
    """The choices that name a GPU's device kind (a kind whose batch class is the GPUs'), in their order."""
    from accelbench.devices.kind import kinds

    gpus = {k.name for k in kinds() if k.batch_class == "gpu"}
    return [c for c in choices if c in gpus]


_SIZE_SUFFIX = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20}
_SIZE_SUFFIX |= {"G": 2**30, "GB": 2**30, "GIB": 2**30}


def parse_size(text: str) -> int:
    """Bytes from ``4096``, ``64K``, ``256M``, ``1G`` (binary multiples)."""
    t = text.strip().upper()
    num = t.rstrip("KMGIB")
    try:
        value = float(num) * _SIZE_SUFFIX[t[len(num) :]]
    except (ValueError, KeyError):
        raise UsageError(f"bad size {text!r}: write bytes, or a number with K, M or G (e.g. 64M)") from None
    if value < 1 or not value.is_integer():
        raise UsageError(f"size {text!r} must be a positive whole number of bytes")
    return int(value)


#: torch.compile's modes, for every family that compiles; reduce-overhead replays CUDA graphs (small batches
#: lose least to kernel-launch latency), max-autotune searches kernels at compile time
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def compile_mode_arg(mode: str) -> str | None:
    """torch.compile's ``mode`` argument for a COMPILE_MODES name (None: torch's default)."""
    return None if mode == "default" else mode


_DURATION_SUFFIX = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``10m``, ``1.5h``."""
    t = text.strip().lower()
    num = t.rstrip("smhin")
    try:
        value = float(num) * _DURATION_SUFFIX[t[len(num) :]]
    except (ValueError, KeyError):
        raise UsageError(f"bad duration {text!r}: write seconds, or a number with s, m or h (e.g. 10m)") from None
    if not value > 0:
        raise UsageError(f"duration {text!r} must be positive")
    return value


@dataclass(frozen=True)
class CommonParams:
    """Where and with how many CPU threads; shared by every benchmark."""

    #: the part that owns the fields this class declares, as ``--help`` groups them ("LoadGen"); empty: the
    #: benchmark's own (a subclass's fields are grouped by the class that declares them, not inherited)
    flag_group: typing.ClassVar[str] = ""

    device: str = "auto"
    threads: int | None = None

    def validate(self) -> None:
        check_device_name(self.device)
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"threads must be a positive integer, got {self.threads}")
        for f in fields(self):
            choices = f.metadata.get("choices")
            if choices:
                check_choice(f.name, getattr(self, f.name), choices)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def check_environment(self, device_type: str) -> None:
        """Reject, before anything runs, what this machine cannot do (overridden where it matters)."""

    def planned_seconds(self) -> float | None:
        """The least time the parameters themselves ask for (a minimum duration), where they say; None else.

        A floor, not an estimate: the plan warns when even the floor is over the timeout.
        """
        return None

    @classmethod
    def flags(cls) -> list[tuple[dataclasses.Field[Any], Any]]:
        """The settings a command line or a suite entry gives, each with its type: the class's fields; a benchmark
        whose parts own settings of their own (a backend's) adds theirs, so each part declares its flags once."""
        hints = typing.get_type_hints(cls)
        return [(f, hints[f.name]) for f in fields(cls)]

    @classmethod
    def flag_parts(cls) -> tuple[Parts, ...]:
        """The parts whose settings :meth:`flags` adds (``--engine``'s, ``--source``'s), so ``--help`` groups each
        part's flags and says which of its parts take each; none by default."""
        return ()

    @classmethod
    def gather(cls, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` (settings by flag name, as :meth:`flags` names them) as the class's constructor takes them:
        the same names here; a benchmark whose parts own settings gathers theirs into the field that holds them."""
        return values

    @classmethod
    def of(cls: type[P], **values: Any) -> P:
        """The parameters from settings named as :meth:`flags` names them (a part's among them), not validated."""
        return cls(**cls.gather(values))

    @classmethod
    def takes_model(cls, model: str) -> bool:
        """Whether this benchmark measures ``model``: where two benchmarks share a command (``accelbench train``
        trains image models and decoders, each its own benchmark), the model decides which one runs."""
        return True

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        """A short description of the workload in ``p`` (a record's params) for tables.

        The default lists the values that differ from the defaults; kernels override it
        with the notation of their field (``1024x1024x1024 fp32``).
        """
        defaults = cls().to_dict()
        skip = {f.name for f in fields(KernelParams)}
        words = [
            str(v) if k == "precision" else f"{k}={v}" for k, v in p.items() if k not in skip and defaults.get(k) != v
        ]
        return " ".join(words)


@dataclass(frozen=True)
class EmulatedParams:
    """Whether a precision the CPU only emulates is measured: declared once for every family with a precision."""

    emulated: bool = opt(
        False,
        "also measure a precision this CPU only emulates (fp16/bf16 without AVX-512 FP16/BF16 or AMX, int8 "
        "without VNNI or AMX, fp8): otherwise skipped, as its figure describes torch's fallback",
        sweep=False,
    )


_T = TimerConfig()


@dataclass(frozen=True)
class TimingParams(CommonParams):
    """The measurement budget of a kernel benchmark; the defaults are :class:`TimerConfig`'s."""

    min_time: float = opt(_T.min_time, "keep sampling for at least S seconds", metavar="S", sweep=False)
    max_time: float = opt(_T.max_time, "stop sampling after S seconds", metavar="S", sweep=False)
    min_reps: int = opt(_T.min_reps, "at least N samples", metavar="N", sweep=False)
    warmup_time: float = opt(
        _T.warmup_seconds,
        "warm-up seconds before sampling (--warmup counts steps in train and tta)",
        metavar="S",
        sweep=False,
    )
    cache: str = opt(
        "auto",
        "cold flushes the GPU's L2 between samples (auto: cold on CUDA, hot on CPU)",
        choices=("auto", "hot", "cold"),
        sweep=False,
    )

    def validate(self) -> None:
        super().validate()
        if self.min_reps < 1:
            raise UsageError(f"--min-reps must be a positive integer, got {self.min_reps}")
        if self.min_time < 0 or self.max_time <= 0 or self.max_time < self.min_time:
            raise UsageError("timing budget: need 0 <= --min-time <= --max-time and --max-time > 0")
        if self.warmup_time < 0:
            raise UsageError(f"--warmup-time must not be negative, got {self.warmup_time:g}")

    def planned_seconds(self) -> float | None:
        """The timing budget's floor: the warm-up, then at least ``min_time`` of samples."""
        return self.warmup_time + self.min_time

    def timer_config(self, device_type: str) -> TimerConfig:
        from accelbench.devices.kind import kind_of

        # cold where the device flushes its cache between event-timed samples; hot on a host clock
        cache = self.cache if self.cache != "auto" else ("cold" if kind_of(device_type).event_timing else "hot")
        return TimerConfig(
            warmup_seconds=self.warmup_time,
            min_reps=self.min_reps,
            min_time=self.min_time,
            max_time=self.max_time,
            cache=cache,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class KernelParams(EmulatedParams, TimingParams):
    """What every kernel benchmark adds: the reference check and CUDA graph replay."""

    check: bool = opt(True, "skip the check against the fp64 reference", flag="--no-check", sweep=False)
    graph: bool = opt(False, "also time CUDA graph replay, beside eager (CUDA only)", sweep=False)

    def check_environment(self, device_type: str) -> None:
        from accelbench.devices.kind import kind_of

        kind = kind_of(device_type)
        if self.graph and not kind.graphs:
            raise UsageError(
                f"--graph times CUDA graph replay and needs a CUDA device (a kind that captures graphs), "
                f"not {kind.name}"
            )


@dataclass(frozen=True)
class ScaleParams:
    """The model's size: declared once for every family that builds a model."""

    scale: str = opt("full", "full (the published model) or tiny (a CPU test size)", choices=("full", "tiny"))


@dataclass(frozen=True)
class NodesParams:
    """Where the ranks of a torchrun launch meet: declared once for every family that launches ranks."""

    nnodes: int = opt(1, "nodes (multi-node: start accelbench on every node)", sweep=False)
    node_rank: int = opt(0, "this node's rank, 0 to nnodes-1 (e.g. $SLURM_NODEID); node 0 records", sweep=False)
    rdzv_endpoint: str = opt("", "host:port of node 0 for a multi-node rendezvous", sweep=False)

    def validate_nodes(self) -> None:
        positive("--nnodes", self.nnodes)
        if not 0 <= self.node_rank < self.nnodes:
            raise UsageError(f"--node-rank must be in 0..{self.nnodes - 1}, got {self.node_rank}")
        if self.nnodes > 1 and ":" not in self.rdzv_endpoint:
            raise UsageError("several nodes need --rdzv-endpoint HOST:PORT (node 0's address)")


@dataclass(frozen=True)
class NoOptions:
    """A part (a serving backend, a generating engine) that takes no settings of its own. A part's settings are a
    frozen dataclass of ``opt`` fields deriving from this: each is a flag of the command that runs the part,
    checked by the part, recorded flat beside the run's own settings and searched by ``tune`` where the part says
    so, while the run's parameters only hold them (a :class:`Parts` field), never name them."""

    def check(self) -> None:
        """Raise a UsageError for a value the part cannot take (nothing by default)."""

    def words(self) -> list[str]:
        """How a record's one-line description names these settings where they are not the defaults (none by
        default: a setting that changes no figure worth telling apart in a table)."""
        return []


class HasOptions(typing.Protocol):
    Options: typing.ClassVar[type[NoOptions]]


#: whether the settings being gathered are the ones a person typed (:func:`typed_by_person`)
_TYPED: contextvars.ContextVar[bool] = contextvars.ContextVar("accelbench_typed_by_person", default=False)


@contextlib.contextmanager
def typed_by_person() -> Iterator[None]:
    """Settings built inside are the ones a person typed on the command line, each flag given on purpose: a setting
    of a part not chosen is refused at any value, its default too (``--engine endpoint --kv-blocks 256`` asks for
    something the endpoint does not do, whatever the number). Elsewhere settings are a program's (a search's
    candidate, a suite's ``[defaults]`` shared by entries of several parts, a stored entry), which may hold another
    part's setting at its neutral value, and that is left out."""
    token = _TYPED.set(True)
    try:
        yield
    finally:
        _TYPED.reset(token)


@dataclass(frozen=True)
class Parts:
    """The parts one setting chooses among (``--backend``'s, ``--engine``'s) and where the chosen part's settings
    are held: the one place that turns the parts' declarations into flags, gathers the given values into the
    chosen part's ``Options`` and refuses a setting of a part not chosen, so no part's name is written elsewhere."""

    selector: str  # the run's field naming the part ("backend")
    holder: str  # the run's field holding its settings ("backend_options")
    noun: str  # how a message names a part ("backend")
    builtin: typing.Callable[[], dict[str, type[HasOptions]]]  # the built-in parts, by name
    lookup: typing.Callable[[str], type[HasOptions]]  # a part by name or package.module:Class (UsageError if none)
    #: the selector left empty, the part is the one whose settings were given (the default where it takes them
    #: all): ``--prompts FILE`` alone names the file source, as ``--source file --prompts FILE`` would
    inferred: bool = False
    #: the part of a run whose selector is empty (one built without :meth:`gather`)
    fallback: str = ""

    def flags(self, own: list[tuple[dataclasses.Field[Any], Any]]) -> list[tuple[dataclasses.Field[Any], Any]]:
        """The run's own flags (``own``, less the field holding the part's settings), then every built-in part's
        settings not among them, each once, with its type."""
        out = [(f, hint) for f, hint in own if f.name != self.holder]
        seen = {f.name for f, _ in out}
        for impl in self.builtin().values():
            hints = typing.get_type_hints(impl.Options)
            for f in fields(impl.Options):
                if f.name not in seen:
                    seen.add(f.name)
                    out.append((f, hints[f.name]))
        return out

    def gather(self, values: dict[str, Any], default: str) -> dict[str, Any]:
        """``values`` with the chosen part's settings moved into :attr:`holder`, complete with its defaults and
        checked against its choices; a setting of another part is refused where a person typed it, or where it is
        not at its neutral value (never silently dropped), and left out where a program holds it at that value."""
        values = dict(values)
        name = str(values.get(self.selector) or (self._inferred(values, default) if self.inferred else default))
        if self.inferred:
            values[self.selector] = name  # a record names its part, whether given or inferred
        options = self.lookup(name).Options
        own = {f.name: f for f in fields(options)}
        hints = typing.get_type_hints(options)
        given = dict(values.pop(self.holder, None) or {})
        others = {f.name: f for b in self.builtin().values() for f in fields(b.Options)}
        for key in [k for k in values if k in own or k in others]:
            value = values.pop(key)
            if key in own:
                given[key] = value
            elif value != others[key].default or _TYPED.get():
                takes = self.takers(key)
                flag = "--" + key.replace("_", "-")
                plural = "s" if len(takes) > 1 else ""
                raise UsageError(f"{flag} applies to the {', '.join(takes)} {self.noun}{plural}, not {name}")
        for key, value in given.items():
            if key not in own:
                raise UsageError(f"{self.noun} {name} has no setting {key!r}; it takes: {', '.join(own) or 'none'}")
            given[key] = _coerce(key, value, hints[key])
            choices = own[key].metadata.get("choices")
            if choices:
                check_choice(key, given[key], choices)
        values[self.holder] = dataclasses.asdict(options(**given))
        return values

    def takers(self, name: str) -> list[str]:
        """The built-in parts whose settings include ``name``, by name."""
        return [n for n, c in self.builtin().items() if name in {f.name for f in fields(c.Options)}]

    @property
    def title(self) -> str:
        """The ``--help`` group of the parts' settings."""
        return f"{self.noun} settings (--{self.selector.replace('_', '-')})"

    def setting_help(self, name: str, help: str) -> str:
        """``help`` of the setting ``name``, led by the parts that take it where not all of them do, as the
        registry says (never a list written by hand that drifts)."""
        takes = self.takers(name)
        if not takes or len(takes) == len(self.builtin()):
            return help
        names = takes[0] if len(takes) == 1 else f"{', '.join(takes[:-1])} and {takes[-1]}"
        return f"{names} {self.noun}{'s' if len(takes) > 1 else ''}: {help}"

    def selector_help(self, help: str) -> str:
        """``help`` of the selector (``--engine``) followed by the parts to choose among, from the registry (each
        with its ``about``, where it has one), and which part an empty selector means."""
        named = [f"{n} ({about})" if (about := getattr(c, "about", "")) else n for n, c in self.builtin().items()]
        out = f"{help}: {', '.join(named)}, or package.module:Class"
        if self.inferred:
            out += f"; empty: the {self.noun} whose settings are given, else {self.fallback}"
        return out

    def _inferred(self, values: dict[str, Any], default: str) -> str:
        """The built-in part whose settings are the given ones (those away from their neutral values): the default
        where it takes them all, else the one part that does; none or several is one line naming ``--selector``."""
        given = set((values.get(self.holder) or {}).keys())
        for impl in self.builtin().values():
            given |= {f.name for f in fields(impl.Options) if f.name in values and values[f.name] != f.default}
        if not given:
            return default
        takers = [n for n, c in self.builtin().items() if given <= {f.name for f in fields(c.Options)}]
        if default in takers:
            return default
        if len(takers) == 1:
            return takers[0]
        flags = ", ".join("--" + k.replace("_", "-") for k in sorted(given))
        choose = "--" + self.selector.replace("_", "-")
        if not takers:
            raise UsageError(f"{flags} belong to different {self.noun}s: give one {self.noun}'s settings ({choose})")
        verb = "applies" if len(given) == 1 else "apply"
        raise UsageError(f"{flags} {verb} to the {', '.join(takers)} {self.noun}s: name one with {choose}")

    def flat(self, d: dict[str, Any]) -> dict[str, Any]:
        """A run's settings with the part's beside them (``d`` as ``dataclasses.asdict`` gives it), complete with
        the part's defaults: a record names ``channels_last`` as a setting of its own, whichever part declares it."""
        d = dict(d)
        given: dict[str, Any] = d.pop(self.holder)
        try:
            return d | dataclasses.asdict(self.lookup(str(d[self.selector] or self.fallback)).Options(**given))
        except (UsageError, TypeError):  # an unknown part or setting: validate says which
            return d | given

    def options(self, params: Any) -> Any:
        """The chosen part's settings, typed (its ``Options``)."""
        name = str(getattr(params, self.selector) or self.fallback)
        return self.lookup(name).Options(**getattr(params, self.holder))


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """Convert ``value`` (from TOML or a CLI string) to the field's type, or say what is wrong."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(name, value, inner[0])
    try:
        if annotation is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
                return value.lower() in ("true", "1", "yes")
            raise ValueError
        if annotation is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if annotation is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if annotation is str:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError
            return str(value)
    except (TypeError, ValueError):
        kind = getattr(annotation, "__name__", str(annotation))
        raise UsageError(f"parameter {name!r} must be {kind}, got {value!r}") from None
    return value


def build_params(cls: type[P], values: dict[str, Any], benchmark: str) -> P:
    """``cls(**values)`` with unknown names rejected, types coerced and the result validated."""
    hints = dict((f.name, hint) for f, hint in cls.flags())
    coerced = {k: _coerce(k, v, hints[k]) if k in hints else v for k, v in values.items()}
    gathered = cls.gather(coerced)  # a part's own settings (a user's backend's too) go where the class keeps them
    unknown = sorted(set(gathered) - {f.name for f in fields(cls)})
    if unknown:
        raise UsageError(f"{benchmark} has no parameter {unknown[0]!r}; its parameters are: {', '.join(sorted(hints))}")
    params = cls(**gathered)
    params.validate()
    return params


def check_steps(warmup: int, num_batches: int, display_every: int) -> None:
    """A training run's steps: warm-up, measured steps, and the window of steps each throughput sample spans."""
    if warmup < 0:
        raise UsageError(f"--warmup must not be negative, got {warmup}")
    positive("--num-batches", num_batches)
    if display_every < 0:
        raise UsageError(f"--display-every must not be negative, got {display_every}")
    if display_every > num_batches:
        raise UsageError("--display-every must not exceed --num-batches (a window is that many steps)")


def positive(name: str, value: int) -> None:
    if value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value}")


def not_negative(params: Any, *fields: str) -> None:
    """Each of ``params``' ``fields`` at 0 or above; the first that is not named alone, by its flag."""
    for name in fields:
        value = getattr(params, name)
        if value < 0:
            raise UsageError(f"--{name.replace('_', '-')} must not be negative, got {value:g}")
