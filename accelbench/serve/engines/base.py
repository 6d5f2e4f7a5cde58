"""The engine seam: a generating engine takes requests and streams each one's tokens to a sink.

An engine owns its weights and its scheduling (a static batch, continuous batching, another process), so the
SUT never sees a batch: it hands requests over as LoadGen issues them and hears back, per request, the first
token and then the completion. Every setting that changes the figure is in :attr:`Engine.facts`, which the
record keeps. Engines by name: :data:`ENGINES`; a user's ``package.module:Class`` is an :class:`Engine` too.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from accelbench.errors import UsageError
from accelbench.params import NoOptions, opt, positive
from accelbench.results.details import EngineFacts

if TYPE_CHECKING:
    import asyncio

    import torch


@dataclass
class TokenRequest:
    """One prompt to answer: LoadGen's sample id, the QSL index, the prompt's tokens and how many to generate."""

    id: int
    index: int
    prompt: list[int]
    max_new_tokens: int


class RunView(Protocol):
    """What an engine reads of the run's settings (an ``infer/llm`` run's parameters) to check and configure
    itself, so engines know nothing else of the run, as sources read :class:`~accelbench.serve.sources.base.
    RunSettings`."""

    @property
    def model(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def checkpoint(self) -> str: ...
    @property
    def prompts(self) -> str: ...


class Sink(Protocol):
    """Where an engine streams to (the LoadGen SUT, or the probe)."""

    def first(self, request: TokenRequest, token: int) -> None: ...

    def step(self, request: TokenRequest, count: int) -> None:
        """``count`` more tokens of ``request`` arrived (after the first): inter-token latency."""

    def done(self, request: TokenRequest, tokens: list[int]) -> None: ...

    def failed(self, request: TokenRequest, error: BaseException) -> None: ...

    # optional: ``answering(request)``, a reasoning model's first answer token (``first_answer``), and
    # ``wrote(request, at)``, when the request reached the server's socket, which times its TTFT (the endpoint's)


@dataclass(frozen=True)
class ModelSource:
    """What an engine that loads its own weights builds from: the preset's config (random weights, seeded) or a
    checkpoint folder, at the served precision."""

    config: Any  # a transformers PretrainedConfig
    checkpoint: str | None
    precision: str  # accelbench's name (fp32, bf16, fp16)
    seed: int = 0


@dataclass(frozen=True)
class EngineSettings:
    """What the run asks of any engine (never the library's defaults, which are sized for other work); an engine's
    own settings are its :attr:`Engine.Options`."""

    max_batch: int  # requests decoded together at most
    max_wait: float = 0.0  # seconds a static batch waits to fill (Server)
    longest: int = 0  # prompt + output tokens of the longest request (sizes the caches)
    ignore_eos: bool = True
    #: requests arrive on LoadGen's schedule (Server, interactive), not as one batch to work through
    open_loop: bool = False
    #: the requests share prefixes on purpose (a shared prefix asked for, a trace's shared blocks, conversations):
    #: an engine with a prefix cache keeps it on
    shared_prefixes: bool = False


#: glibc malloc's thresholds (bytes) a model-running engine fixes on a CPU: the most its dynamic rule ever sets
#: (freeing a mapped block raises the mapping threshold to that block's size, up to 32 MiB on 64-bit, and the
#: trim threshold to twice it)
HEAP_MMAP_THRESHOLD, HEAP_TRIM_THRESHOLD = 32 << 20, 64 << 20
#: ``mallopt``'s parameter numbers for them (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def steady_heap(device: "torch.device") -> EngineFacts:
    """On a CPU with glibc, fix malloc's mapping and trim thresholds at :data:`HEAP_MMAP_THRESHOLD` and
    :data:`HEAP_TRIM_THRESHOLD` for the whole process; the record's words for what was set (none elsewhere).

    Left to glibc, whether the few MB each batch frees at the top of the engine thread's arena are kept or handed back
    and faulted in again depends on what the process freed before (``docs/infer.md`` has the cost). The setting
    outlives the engine: glibc has no way back to its moving thresholds."""
    import ctypes
    import platform

    if device.type != "cpu" or platform.libc_ver()[0] != "glibc":
        return {}
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if not (mallopt(_M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD)):
        return {"host_heap": "glibc malloc's own thresholds (mallopt refused fixed ones)"}
    return {
        "host_heap": f"glibc malloc: blocks from {HEAP_MMAP_THRESHOLD >> 20} MiB mapped, an arena's free top kept "
        f"to {HEAP_TRIM_THRESHOLD >> 20} MiB (fixed for the process, not glibc's moving thresholds)"
    }


@dataclass(frozen=True)
class CompileOptions(NoOptions):
    engine_compile: bool = opt(
        False,
        "compile the forward step (torch.compile; vLLM's CUDA graphs), in "
        "the probe's warm-up, whose first batch's seconds the record keeps",
    )


@dataclass(frozen=True)
class PagedOptions(NoOptions):
    """A paged KV cache's sizes, where the engine has one."""

    page_size: int = opt(16, "KV-cache page size in tokens")
    kv_blocks: int = opt(0, "KV-cache pages (0: --batch-size longest requests)")
    max_batch_tokens: int = opt(
        0,
        "tokens in one forward step (0: the engine's, 2 x --batch-size x --page-size for transformers)",
    )

    def check(self) -> None:
        positive("--page-size", self.page_size)
        for name in ("kv_blocks", "max_batch_tokens"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name.replace('_', '-')} must not be negative, got {getattr(self, name)}")


@dataclass(frozen=True)
class PagedCompileOptions(PagedOptions, CompileOptions):
    pass


class Engine:
    """Streams generated tokens; subclasses implement :meth:`start`, :meth:`submit` and :meth:`stop`."""

    name: ClassVar[str] = ""
    #: a few words ``--engine``'s help says of it, after its name
    about: ClassVar[str] = ""
    #: the pip extra that brings the engine's library, for the one-line "not installed" message
    extra: ClassVar[str] = ""
    #: whether it runs a model (the null engine answers at once)
    runs_model: ClassVar[bool] = True
    #: whether it builds its own copy of the weights (vLLM, from a folder): it is given a :class:`ModelSource`,
    #: not a built model, so the weights are not held twice
    loads_weights: ClassVar[bool] = False
    #: whether the model runs elsewhere (a server): its devices are the server's (``--server-devices``)
    remote: ClassVar[bool] = False
    #: the engine's own settings (a frozen dataclass of ``opt`` fields): each is a flag of ``accelbench infer``
    #: for language models, checked by the engine, recorded with the run; a value given for an engine that does
    #: not declare it is refused
    Options: ClassVar[type[NoOptions]] = NoOptions
    #: the vocabulary random prompts are drawn from when no model is built here (a served model's tokenizer's)
    vocab_size: int | None = None
    #: what the record says of the engine (:class:`accelbench.results.details.EngineFacts`; an engine declares its
    #: own keys in a TypedDict that extends it, as the type of its ``facts``)
    facts: EngineFacts

    def __init__(self, options: NoOptions | None = None) -> None:
        self.options: Any = options if options is not None else self.Options()
        self.facts = {"engine": self.name}

    def unavailable(self) -> str | None:
        """Why this engine cannot run here (its library missing), or None. A model-running engine needs
        ``transformers`` (the presets are its configs)."""
        import importlib.util

        if self.runs_model and importlib.util.find_spec("transformers") is None:
            return "transformers is not installed: pip install 'accelbench[llm]'"
        return None

    @classmethod
    def check_run(cls, params: RunView, options: Any) -> None:
        """Raise a UsageError for what the run's parameters cannot do with this engine's settings (no I/O: said
        while the parameters are validated). Nothing by default."""

    @classmethod
    def labels(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """The run's settings (flat, as a record states them) as this engine's records label them; the same by
        default."""
        return settings

    @classmethod
    def unlabel(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """A record's labels read back as the settings a run resolves again (the inverse of :meth:`labels`)."""
        return settings

    @classmethod
    def devices(cls, options: Any) -> int:
        """The devices the per-device figures divide by: one here; a server's own (the endpoint engine)."""
        return 1

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        """Words a record's one-line description adds after the engine's name (what it served). None by default."""
        return []

    @classmethod
    def search(cls, settings: dict[str, Any]) -> list[dict[str, Any]]:
        """This engine's own settings worth searching at a candidate's ``settings`` (the shape stage of tune's
        language-model search), each a dict of changes; none by default."""
        return []

    def check(self, params: RunView) -> None:
        """Before anything runs: raise a UsageError for what the run's parameters cannot do with this engine
        (a server that does not answer, for the endpoint engine). Nothing by default."""

    def configure(self, params: RunView) -> None:
        """Read what the engine needs from the run's parameters, before :meth:`start`. Nothing by default."""

    @classmethod
    def min_requests(cls, params: RunView) -> int:
        """The fewest requests a run of this engine issues (0: LoadGen's plan alone)."""
        return 0

    def resolved(self) -> dict[str, Any]:
        """Settings the engine resolved in :meth:`configure` (a server's model name), recorded as if given."""
        return {}

    def measured(self, arrivals: bool) -> dict[str, Any]:
        """What the engine saw of itself since the last call (after each LoadGen run), for the record; a
        ``limited_by`` entry says the engine's own side, not the system under test, limited the run."""
        return {}

    def preflight_requests(self) -> int:
        """Requests the engine's own check (:meth:`configure`) sent the system under test before any load: its
        counters hold them, no figure does (``details.unmeasured_requests``). None by default."""
        return 0

    def event_loop(self) -> "asyncio.AbstractEventLoop | None":
        """The asyncio loop the engine's requests are sent and read on, where it has one (the endpoint engine):
        accelbench's driver then runs on that loop's thread, so a request's send and each of its chunks are
        stamped on one thread, with no hand-over between them. None: the driver runs on its own thread."""
        return None

    def local_processes(self) -> list[int]:
        """Processes on this machine, outside accelbench, that are the system under test (a server on this
        host): their CPU is the work measured, not contention. None by default."""
        return []

    def start(self, model: Any, device: "torch.device", sink: Sink, settings: EngineSettings) -> None:
        raise NotImplementedError

    def submit(self, requests: list[TokenRequest]) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class QueuedEngine(Engine):
    """An engine served by one scheduler thread reading a queue: the SUT's issue callback only enqueues."""

    def start(self, model: Any, device: "torch.device", sink: Sink, settings: EngineSettings) -> None:
        self.model, self.device, self.sink, self.settings = model, device, sink, settings
        self.queue: queue.Queue[list[TokenRequest] | None] = queue.Queue()
        self.busy = 0.0
        self._thread = threading.Thread(target=self._loop, name=f"accelbench-{self.name}", daemon=True)
        self._thread.start()

    def submit(self, requests: list[TokenRequest]) -> None:
        self.queue.put(requests)

    def stop(self) -> None:
        self.queue.put(None)
        self._thread.join()

    def _loop(self) -> None:
        from accelbench.devices.kind import kind_of

        try:
            if self.device is not None:
                kind_of(self.device).prepare_thread(self.device)
        except BaseException as exc:  # noqa: BLE001 - every request is answered failed, with why
            self._fail_all(exc)
            return
        pending: list[TokenRequest] = []
        stopping = False
        while True:
            if not pending:
                item = self.queue.get()
                if item is None:
                    return
                pending.extend(item)
            deadline = time.perf_counter() + self.settings.max_wait
            while len(pending) < self.settings.max_batch and not stopping:
                try:
                    remaining = deadline - time.perf_counter()
                    item = self.queue.get(timeout=remaining) if remaining > 0 else self.queue.get_nowait()
                except queue.Empty:
                    break
                stopping = item is None
                pending.extend(item or [])
            batch, pending = pending[: self.settings.max_batch], pending[self.settings.max_batch :]
            start = time.perf_counter()
            try:
                self.serve(batch)
            except BaseException as exc:  # the SUT must still answer LoadGen; the run is reported failed
                for r in batch:
                    self.sink.failed(r, exc)
            self.busy += time.perf_counter() - start
            if stopping and not pending:
                return

    def _fail_all(self, exc: BaseException) -> None:
        while (item := self.queue.get()) is not None:
            for r in item:
                self.sink.failed(r, exc)

    def serve(self, batch: list[TokenRequest]) -> None:
        raise NotImplementedError


class NullEngine(QueuedEngine):
    """Answers every request at once with its tokens: what the harness alone costs (LoadGen, SUT, threads)."""

    name = "null"
    about = "the harness alone"
    runs_model = False

    def serve(self, batch: list[TokenRequest]) -> None:
        for r in batch:
            self.sink.first(r, 0)
            self.sink.done(r, [0] * r.max_new_tokens)


ENGINES: dict[str, str] = {
    "transformers": "accelbench.serve.engines.continuous:ContinuousBatching",
    "static": "accelbench.serve.engines.static:StaticBatch",
    "vllm": "accelbench.serve.engines.vllm:Vllm",
    "endpoint": "accelbench.serve.engines.endpoint.engine:EndpointEngine",
    "null": "accelbench.serve.engines.base:NullEngine",
}


def engine_class(name: str) -> type[Engine]:
    """A built-in engine by name, one an installed package declares (:mod:`accelbench.plugins`), or a user's
    ``package.module:Class`` (an :class:`Engine` subclass)."""
    from accelbench.plugins import load_class, with_installed

    if ":" in name:
        return load_class(name, Engine, "engine")
    known = with_installed("engine", ENGINES)
    if name not in known:
        raise UsageError(f"unknown engine {name!r}: choose one of {', '.join(known)}, or package.module:Class")
    return load_class(str(known[name]), Engine, "engine")


def engine_names() -> list[str]:
    """The engines by name, built-in and installed (their options are flags of ``accelbench infer``)."""
    from accelbench.plugins import with_installed

    return list(with_installed("engine", ENGINES))


@dataclass
class Timeline:
    """A sink that keeps each request's times (the probe's, and the direct-call bench's)."""

    started: float = field(default_factory=time.perf_counter)
    firsts: dict[int, float] = field(default_factory=dict)
    dones: dict[int, tuple[float, int]] = field(default_factory=dict)
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)
    expected: int = 0
    on_done: Callable[[], None] | None = None
    failures: int = 0

    def first(self, request: TokenRequest, token: int) -> None:
        self.firsts[request.id] = time.perf_counter()

    def step(self, request: TokenRequest, count: int) -> None:
        pass

    def done(self, request: TokenRequest, tokens: list[int]) -> None:
        self.dones[request.id] = (time.perf_counter(), len(tokens))
        if len(self.dones) >= self.expected:
            self.finished.set()

    def failed(self, request: TokenRequest, error: BaseException) -> None:
        self.error = self.error or error
        self.failures += 1
        self.done(request, [])
