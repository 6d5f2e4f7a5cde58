"""``static``: batched ``generate`` with a static KV cache, the engine MLPerf's first llama2-70b reference SUT used.

The scheduler takes up to ``max_batch`` queued requests, left-pads their prompts and decodes them together; a
streamer passes each request's first token and its own completion to LoadGen as they happen, mid-batch where it is
shorter. Each batch gets a cache sized to it: left to transformers, every batch after one long request would
allocate, and attend over, that length.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from accelbench.results.details import EngineFacts
from accelbench.serve.engines.base import (
    CompileOptions,
    EngineSettings,
    QueuedEngine,
    Sink,
    TokenRequest,
    steady_heap,
)

if TYPE_CHECKING:
    import torch


#: compiled: prompt widths and output lengths are rounded up to a multiple of these many tokens (the static
#: cache holds both, so either changes the compiled shapes)
BUCKET, OUTPUT_BUCKET = 64, 16
#: compiled: a batch's static cache is a power of two of tokens or 1.5 times one, at least this many: each length
#: is a compile, and two an octave waste at most half again, while Dynamo's 8 recompiles cover 128 to 1536 tokens
MIN_COMPILED_CACHE = 128
#: Inductor's kernels without CUDA graph trees: the engine generates from its scheduler thread, and graph trees are
#: not safe off the thread that imported inductor (pytorch#123177). transformers' own default is "reduce-overhead"
#: (graph trees): a bare comparison must name this mode too (:func:`compile_config`)
COMPILE_MODE = "default"
#: the text of Dynamo's count of a frame that hit its recompile limit (it then runs that frame's new shapes eager,
#: saying so once, in a log line)
RECOMPILE_LIMIT_HIT = "Dynamo recompile limit exceeded"


def no_eos(config: Any) -> int:
    """An end-of-sequence id no token has (one past the vocabulary): ``generate`` then runs to ``max_new_tokens``
    with no logit masked and, unlike a negative id, no warning on every call."""
    return int(config.vocab_size)


def compile_config() -> Any:
    """The ``transformers.CompileConfig`` the compiled engine generates with: Inductor, mode :data:`COMPILE_MODE`,
    static shapes, on every device (``generate`` compiles on its own list of accelerators only unless told). One
    function, so a bare ``generate`` compared with the engine compiles the same way."""
    from transformers import CompileConfig

    config = CompileConfig(fullgraph=False, dynamic=False, mode=COMPILE_MODE)
    config._compile_all_devices = True  # type: ignore[assignment]  # transformers declares it None
    return config


def cache_length(width: int, new_tokens: int, compiled: bool) -> int:
    """Tokens of one batch's static cache: what ``generate`` writes (the prompt and every new token but the last),
    or, compiling, that rounded up to the next power of two or 1.5 times one (:data:`MIN_COMPILED_CACHE`), so the
    compiled step sees a few cache lengths, each compiled once, whatever the lengths of the batches (a
    conversation's turns grow)."""
    need = max(width + new_tokens - 1, 1)
    if not compiled:
        return need
    if need <= MIN_COMPILED_CACHE:
        return MIN_COMPILED_CACHE
    power = 1 << (need - 1).bit_length()  # the power of two at or above
    return power * 3 // 4 if need <= power * 3 // 4 else power


class StaticFacts(EngineFacts, total=False):
    """The static-batch engine's own keys: its batch and wait, the cache (one a batch, of which lengths), how
    prompts were padded, and, compiling, the graphs compiled, the cache lengths they cover and Dynamo's mode."""

    max_batch: int
    max_wait_ms: float
    cache: str
    cache_sizing: str
    cache_lengths: list[int]
    padding: str
    compile_mode: str | None
    compile_graphs: int
    compiled_cache_lengths: list[int]


class StaticBatch(QueuedEngine):
    name = "static"
    about = "batched generate, static KV cache"
    Options = CompileOptions
    options: CompileOptions
    facts: StaticFacts

    def start(self, model: Any, device: "torch.device", sink: Sink, settings: EngineSettings) -> None:
        from transformers import GenerationConfig

        self.generation = GenerationConfig(
            do_sample=False,
            pad_token_id=0,
            # ignore_eos as vLLM's: generation goes on past an end of sequence, whose logit is left alone (None
            # would take the model's EOS and min_new_tokens would then mask it, changing the greedy tokens)
            eos_token_id=no_eos(model.config) if settings.ignore_eos else model.config.eos_token_id,
            # each batch's own static cache is passed to generate (serve): none is made from this config
            cache_implementation=None,
            # transformers compiles a static-cache generate by itself on some accelerators (CUDA graphs on
            # cuda): the record says whether the step was compiled, so it is compiled when asked, everywhere
            disable_compile=not self.options.engine_compile,
        )
        if self.options.engine_compile:
            self.generation.compile_config = compile_config()
        self.compiles = CompileWatch() if self.options.engine_compile else None
        self.cache_lengths: set[int] = set()
        facts: StaticFacts = {
            "engine": self.name,
            "max_batch": settings.max_batch,
            "max_wait_ms": settings.max_wait * 1000,
            "cache": "static",
            "cache_sizing": "one a batch: its prompt width and new tokens"
            + (
                f", up to a power of two or 1.5x one (at least {MIN_COMPILED_CACHE})"
                if self.options.engine_compile
                else ""
            ),
            "cache_lengths": [],  # each distinct length a batch's cache had
            "kv_allocated_tokens": 0,  # the largest one batch's cache held: its rows x its length
        }
        if self.compiles is not None:
            facts |= self.compiles.facts()
        facts |= {
            "kv_capacity_tokens": settings.max_batch * settings.longest,  # a full batch of the longest requests
            "compile": self.options.engine_compile,
        }
        if self.options.engine_compile:
            facts["compile_mode"] = self.generation.compile_config.mode
        facts["padding"] = (
            f"left, to a multiple of {BUCKET} tokens (outputs to {OUTPUT_BUCKET}), the batch filled to "
            f"{settings.max_batch} rows (one compiled shape per bucket)"
            if self.options.engine_compile
            else "left, to the batch's longest prompt"
        )
        heap = steady_heap(device).get("host_heap")
        if heap is not None:
            facts["host_heap"] = heap
        facts["eos_token_id"] = getattr(model.config, "eos_token_id", None)  # MLPerf's TEST06 counts its repeats
        self.facts = facts
        super().start(model, device, sink, settings)

    def serve(self, batch: list[TokenRequest]) -> None:
        import torch
        from transformers import StaticCache

        rows, width, longest = shape(batch, self.settings, self.options.engine_compile)
        ids = torch.zeros((rows, width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i in range(rows):  # rows past the batch repeat its first request; their tokens go nowhere
            r = batch[i] if i < len(batch) else batch[0]
            ids[i, width - len(r.prompt) :] = torch.tensor(r.prompt)
            mask[i, width - len(r.prompt) :] = 1
        generation = copy.copy(self.generation)  # this batch's lengths, on a copy: one config object, not two
        generation.max_new_tokens = longest
        length = cache_length(width, longest, self.options.engine_compile)
        streamer = _Streamer(batch, self.sink)
        with torch.inference_mode():
            cache = StaticCache(config=self.model.config, max_cache_len=length)
            watched = self.compiles.batch(length) if self.compiles is not None else contextlib.nullcontext()
            with watched:
                self.model.generate(
                    input_ids=ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    generation_config=generation,
                    streamer=streamer,
                    cache=cache,
                )
        self.cache_lengths.add(length)
        self.facts["cache_lengths"] = sorted(self.cache_lengths)
        self.facts["kv_allocated_tokens"] = max(self.facts.get("kv_allocated_tokens", 0), rows * length)
        if self.compiles is not None:
            self.facts |= self.compiles.facts()
        streamer.end()


class CompileWatch:
    """What Dynamo did in each compiled batch, for the record: the graphs it compiled, and whether a batch ran
    eager. Past its recompile limit Dynamo does not fail: it counts the hit once and from then on runs every new
    shape of that frame uncompiled, silently, so a batch of a cache length not compiled before the hit ran eager."""

    def __init__(self) -> None:
        self.graphs = 0
        self.compiled: set[int] = set()  # cache lengths whose decode step ran compiled
        self.hit_at: int | None = None  # the cache length at which a limit was hit
        self.limit = ""  # which limit, and its value
        self.eager_batches = 0

    @contextlib.contextmanager
    def batch(self, length: int) -> Iterator[None]:
        """Around one ``generate`` call whose static cache holds ``length`` tokens (on the thread that generates:
        Dynamo's settings, its limits among them, are the thread's own)."""
        from torch._dynamo.utils import counters

        graphs, hits = counters["stats"]["unique_graphs"], _limit_hits()
        yield
        self.graphs += counters["stats"]["unique_graphs"] - graphs
        new = {what for what, n in _limit_hits().items() if n > hits.get(what, 0)}
        if new and self.hit_at is None:
            import torch._dynamo

            self.hit_at = length
            kind = next((m.group(1) for what in new if (m := re.search(r"Limit type: (\w+)", what))), "recompile_limit")
            self.limit = f"{kind} {getattr(torch._dynamo.config, kind, '?')}"
        if length in self.compiled:
            return
        if self.hit_at is None:
            self.compiled.add(length)
        else:
            self.eager_batches += 1

    def facts(self) -> StaticFacts:
        """The record's words: graphs compiled, whether compile held, and if not where it stopped."""
        facts: StaticFacts = {
            "compile_graphs": self.graphs,
            "compile_held": self.hit_at is None,
            "compiled_cache_lengths": sorted(self.compiled),
        }
        if self.hit_at is not None:
            facts["compile_fallback"] = (
                f"Dynamo's limit ({self.limit}) was hit at a cache of {self.hit_at} tokens: {self.eager_batches} "
                "batch(es) of a cache length not compiled before ran eager"
            )
        return facts


def _limit_hits() -> dict[str, int]:
    """Dynamo's counts of frames refused for a recompile limit, by message (which names the limit)."""
    from torch._dynamo.utils import counters

    return {what: n for what, n in counters["unimplemented"].items() if what.startswith(RECOMPILE_LIMIT_HIT)}


def shape(batch: list[TokenRequest], settings: EngineSettings, compiled: bool) -> tuple[int, int, int]:
    """Rows, prompt width and new tokens of one ``generate`` call: the batch's own, or, compiling, rounded up to
    ``BUCKET`` tokens and ``max_batch`` rows, so the compiled step sees a few shapes, not one per batch (a compile
    takes seconds, and every new shape is another)."""
    width = max(len(r.prompt) for r in batch)
    longest = max(r.max_new_tokens for r in batch)
    if not compiled:
        return len(batch), width, longest

    def up(n: int, k: int) -> int:
        return -(-n // k) * k

    return max(settings.max_batch, len(batch)), up(width, BUCKET), up(longest, OUTPUT_BUCKET)


class _Streamer:
    """``generate``'s streamer: its first ``put`` is the prompts, each later one a (batch,) step of new tokens."""

    def __init__(self, batch: list[TokenRequest], sink: Sink) -> None:
        self.batch, self.sink = batch, sink
        self.tokens: list[list[int]] = [[] for _ in batch]
        self.prompt_seen = False
        self.open = set(range(len(batch)))

    def put(self, value: "torch.Tensor") -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        step = value.reshape(-1).tolist()  # one device-to-host copy a step: the tokens must be read anyway
        for i in list(self.open):
            self.tokens[i].append(step[i])
            request = self.batch[i]
            if len(self.tokens[i]) == 1:
                self.sink.first(request, step[i])
            else:
                self.sink.step(request, 1)
            if len(self.tokens[i]) >= request.max_new_tokens:
                self.open.discard(i)
                self.sink.done(request, self.tokens[i])

    def end(self) -> None:
        for i in sorted(self.open):  # stopped early (end of sequence allowed): complete with what came
            self.open.discard(i)
            if not self.tokens[i]:
                self.sink.first(self.batch[i], 0)
            self.sink.done(self.batch[i], self.tokens[i])
