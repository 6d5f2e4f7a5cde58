"""The task seam: what a search needs to know of the benchmark whose settings it searches (torch-free).

A search is one schedule for every benchmark (:mod:`.search`); the benchmark's flags, candidates, trial entries
and gate words are its :class:`TuneTask`'s, so the search names no benchmark. ``--task`` names the command and the
model chooses among that command's benchmarks (``takes_model``), as ``accelbench infer MODEL`` does; a task's own
flags are its ``Options``, so another task's flag is refused in one line."""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Protocol

from accelbench.devices import resolve_device
from accelbench.devices.kind import kind_of
from accelbench.errors import UsageError
from accelbench.params import CommonParams, NoOptions, check_choice, opt
from accelbench.plugins import load_class
from accelbench.tune.candidate import Candidate, Space


class SearchSettings(Protocol):
    """What a task reads of the search's settings (``tune``'s parameters), so tasks know nothing else of them."""

    @property
    def model(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def scale(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def threads(self) -> int | None: ...
    @property
    def precisions(self) -> str: ...
    @property
    def batch_sizes(self) -> str: ...
    @property
    def compile(self) -> bool: ...
    @property
    def emulated(self) -> bool: ...
    @property
    def task_options(self) -> dict[str, Any]: ...

#: LoadGen seconds of a screening and of a confirmation trial (quick profile, non-compliant)
SCREEN_SECONDS, CONFIRM_SECONDS = 2.0, 6.0
#: a first gate's start-up, model load and LoadGen runs, in screenings (measured: docs/tune.md)
GATE_SCREENS = 3.0
#: ``--task`` words that changed, with the word that replaced them: refused with the new one
RENAMED = {"serve": "infer"}


class TuneTask:
    """The search of one benchmark's settings. A subclass names the benchmark (``name``, as the registry does), its
    parameters (``params``: whose ``takes_model`` chooses it for a model), the command that runs it (``command``,
    what ``--task`` says) and its own flags (``Options``); it builds the trials' parameters and its space."""

    #: the benchmark searched, as the registry names it (a test holds the two equal)
    name: ClassVar[str] = ""
    #: the command that runs the benchmark: the word ``--task`` gives, and the winner's command
    command: ClassVar[str] = ""
    #: the benchmark's parameters; their ``takes_model`` says which models this task searches
    params: ClassVar[type[CommonParams]] = CommonParams
    #: the task's own flags of ``accelbench tune`` (checked by it, recorded flat beside the search's own)
    Options: ClassVar[type[NoOptions]] = NoOptions
    #: whether a candidate passes an accuracy gate before it may be a finalist (training changes no answer)
    gated: ClassVar[bool] = True
    #: whether a screening its benchmark called INVALID is left out of the ranking: a trial held to a limit it broke
    #: (a served language model's TPOT) bought its figure by breaking it
    held_to_limit: ClassVar[bool] = False

    def __init__(self, tune: SearchSettings, options: NoOptions | None = None) -> None:
        self.tune = tune
        self.options: Any = options if options is not None else self.Options(**tune.task_options)

    # -- what the parameters must say -------------------------------------------------------------------------

    def check(self) -> None:
        """Raise a UsageError for what this benchmark cannot search with the search's settings (files are read
        here: a checkpoint or prompt file that cannot be read is bad input before any trial)."""

    def precisions(self) -> tuple[str, ...]:
        """The precisions ``--precisions`` may name."""
        return ()

    # -- the space ----------------------------------------------------------------------------------------------

    def default(self) -> Candidate:
        """The benchmark's default settings: the candidate every other is measured against."""
        raise NotImplementedError

    def runtimes(self) -> Space:
        """The first stage: every runtime at the default shape, the default first, compiled ones last."""
        raise NotImplementedError

    def batches(self, device: Any) -> list[Any]:
        """The batch sizes (requests in flight) the second stage tries on ``device`` around a best runtime."""
        return []

    def shapes(self, best: list[Candidate]) -> list[Candidate]:
        """The second stage: the shape of the work around the best runtimes (may repeat what was tried)."""
        return []

    def is_reference(self, candidate: Candidate) -> bool:
        """Whether ``candidate`` is its accuracy gate's reference, which needs no gate."""
        return False

    # -- the trials ---------------------------------------------------------------------------------------------

    def trial(self, **settings: Any) -> CommonParams:
        """The benchmark's parameters for one trial: the search's model and place, with ``settings``."""
        raise NotImplementedError

    def trial_of(self, phase: str, settings: dict[str, Any]) -> CommonParams:
        """A trial of ``phase`` (screen, gate, confirm): the candidate's settings at the phase's length. A
        confirmation's is also the command that reproduces a candidate's figure (:func:`.outcome.reproduce`)."""
        raise NotImplementedError

    def first_expected(self, phase: str, per_sample: Callable[[], float | None]) -> tuple[float, float] | None:
        """A first trial of ``phase`` as (times a screening, plus seconds), where the task knows better than the
        budget's default; ``per_sample`` gives the default settings' screened seconds per sample."""
        return None

    # -- the outcome --------------------------------------------------------------------------------------------

    def gate_words(self) -> str:
        """What the accuracy gate judged, for the summary."""
        raise NotImplementedError

    def accuracy_words(self) -> str | None:
        """Whether the recommendation's accuracy was verified, for its headline (None: no gate)."""
        return None

    def ungated_words(self) -> str:
        """A ranking row's accuracy where the task gates nothing."""
        return "not gated"

    @classmethod
    def describe_words(cls, p: dict[str, Any]) -> list[str]:
        """Words of a search's one-line description (a record's params) after the model and ``--task``."""
        return []


#: the tasks ``accelbench tune`` runs, one module each, imported when asked for: in the order their commands list
#: them (the first of a command is its default where a model is taken by several)
TASKS = (
    "accelbench.tune.loadgen:LoadGenTask",
    "accelbench.tune.serve:ServeTask",
    "accelbench.tune.train:TrainTask",
    "accelbench.tune.train:LLMTrainTask",
)


def builtin_tasks() -> tuple[type[TuneTask], ...]:
    """The benchmarks ``accelbench tune`` searches (:data:`TASKS`)."""
    return tuple(load_class(path, TuneTask, "tune task") for path in TASKS)


def task_names() -> dict[str, type[TuneTask]]:
    """The tasks by the benchmark each searches."""
    return {t.name: t for t in builtin_tasks()}


def task_class(name: str) -> type[TuneTask]:
    """A task by the benchmark it searches."""
    tasks = task_names()
    if name not in tasks:
        raise UsageError(f"accelbench tune searches no benchmark {name!r}: it searches {', '.join(tasks)}")
    return tasks[name]


def commands() -> tuple[str, ...]:
    """The words ``--task`` takes: the commands whose benchmarks are searched."""
    return tuple(dict.fromkeys(t.command for t in builtin_tasks()))


def route(command: str, model: str) -> type[TuneTask]:
    """The task that searches ``model`` for ``command``: the one of the command's benchmarks whose parameters take
    the model (the registry's route, over the benchmarks searched)."""
    if command in RENAMED:
        chosen = route(RENAMED[command], model)
        raise UsageError(
            f"--task {command} is now --task {RENAMED[command]}: the model chooses the benchmark searched "
            f"({model}: {chosen.name})"
        )
    check_choice("task", command, commands())
    offered = [t for t in builtin_tasks() if t.command == command]
    return next((t for t in offered if t.params.takes_model(model)), offered[0])


def trial_base(tune: SearchSettings) -> dict[str, Any]:
    """What every trial takes from the search: its model, scale, emulation, device and threads."""
    return {
        "model": tune.model,
        "scale": tune.scale,
        "emulated": tune.emulated,
        "device": tune.device,
        "threads": tune.threads,
    }


def checkpoint_option() -> Any:
    """``--checkpoint``, one flag of every task that serves a model (each ``Options`` declares its own field)."""
    return opt(
        "",
        "weights to serve, which make the accuracy gate meaningful: a state_dict (.pt) for an image model, a "
        "Hugging Face checkpoint folder for a language model",
        metavar="PATH",
        sweep=False,
    )


def weights_words(checkpoint: str) -> str:
    """The served model's weights in a gate's words."""
    return f"checkpoint {checkpoint}" if checkpoint else "random weights"


def device_of(tune: SearchSettings) -> Any:
    """The search's device (a torch device)."""
    return resolve_device(tune.device)


def compile_modes(device: Any) -> tuple[str, ...]:
    """torch.compile's default, and where the device captures graphs its CUDA-graph mode (reduce-overhead):
    launch latency is what small batches lose."""
    return ("default", "reduce-overhead") if kind_of(device).graphs else ("default",)


def batch_class(device: Any) -> str:
    """The class published batch sizes are given for ("gpu" or "cpu")."""
    return kind_of(device).batch_class


def ordered(space: Space, default: Candidate, slow: Callable[[Candidate], bool]) -> Space:
    """``space`` with the default first (else the first candidate) and the ``slow`` ones last; nothing left to
    search is one line."""
    keys = [c.key for c in space.candidates]
    if default.key not in keys:
        if not space.candidates:
            raise UsageError("nothing to search: every combination asked for is left out here; widen the lists")
        first = space.candidates[0]
    else:
        first = space.candidates[keys.index(default.key)]
    rest = [c for c in space.candidates if c is not first]
    space.candidates = [first] + [c for c in rest if not slow(c)] + [c for c in rest if slow(c)]
    return space
