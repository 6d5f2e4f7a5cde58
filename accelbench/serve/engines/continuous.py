"""``transformers``: the library's own continuous batching (``ContinuousBatchingManager``) with paged attention.

Its defaults size the cache and the batch-token budget for a GPU server, so the page size, the pages, the budget,
the requests per step and compile are chosen here and recorded (``docs/infer.md`` has what the defaults cost).
Requests are added as LoadGen issues them; one reader thread streams the manager's outputs to the sink.
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

from accelbench.devices.kind import kind_of
from accelbench.results.details import EngineFacts
from accelbench.serve.engines.base import (
    Engine,
    EngineSettings,
    PagedCompileOptions,
    PagedOptions,
    Sink,
    TokenRequest,
)
from accelbench.serve.engines.static import no_eos

if TYPE_CHECKING:
    import torch

#: batch-token budgets ``tune`` tries, in multiples of the default (2 x requests in flight x page size)
TOKEN_BUDGETS = (0.5, 4.0)


def cache_plan(settings: EngineSettings, options: PagedOptions) -> tuple[int, int]:
    """Pages and the batch-token budget: enough pages for ``max_batch`` requests of the longest sequence, and a
    step budget that lets one prompt of typical length prefill while the others decode."""
    per_request = math.ceil(max(settings.longest, 1) / options.page_size) + 1
    blocks = options.kv_blocks or per_request * settings.max_batch
    tokens = options.max_batch_tokens or max(settings.max_batch * options.page_size * 2, 256)
    return blocks, tokens


class ContinuousFacts(EngineFacts, total=False):
    """The continuous-batching engine's own keys: its KV cache's pages, the tokens and requests a step may take,
    and the scheduler transformers ran."""

    page_size: int
    kv_blocks: int
    max_batch_tokens: int
    max_requests_per_batch: int
    scheduler: str


class ContinuousBatching(Engine):
    name = "transformers"
    about = "its continuous batching, paged KV cache"
    Options = PagedCompileOptions
    options: PagedCompileOptions
    facts: ContinuousFacts

    @classmethod
    def search(cls, settings: dict[str, Any]) -> list[dict[str, Any]]:
        """The batch-token budget of one forward step, around the default (2 x requests in flight x page size)."""
        page = cls.Options.page_size  # a dataclass's class attribute: the field's default
        default = 2 * int(settings["batch_size"]) * int(settings.get("page_size") or page)
        return [{"max_batch_tokens": int(default * k)} for k in TOKEN_BUDGETS]

    def start(self, model: Any, device: "torch.device", sink: Sink, settings: EngineSettings) -> None:
        from transformers import ContinuousBatchingConfig, GenerationConfig

        self.sink = sink
        blocks, tokens = cache_plan(settings, self.options)
        generation = GenerationConfig(
            do_sample=False,
            eos_token_id=no_eos(model.config) if settings.ignore_eos else model.config.eos_token_id,
            pad_token_id=0,
            max_new_tokens=max(settings.longest, 1),
        )
        config = ContinuousBatchingConfig(
            page_size=self.options.page_size,
            num_blocks=blocks,
            max_batch_tokens=tokens,
            max_requests_per_batch=settings.max_batch,
            # shared where the requests share prefixes on purpose; random prompts share none, and sharing them would
            # only cost bookkeeping
            allow_block_sharing=settings.shared_prefixes,
            use_cuda_graph=None if kind_of(device).accelerator else False,  # graphs where a kind captures them
            default_compile_level=1 if self.options.engine_compile else 0,
            seed=0,
        )
        self.facts = {
            "engine": self.name,
            "page_size": self.options.page_size,
            "kv_blocks": blocks,
            "kv_capacity_tokens": blocks * self.options.page_size,
            "max_batch_tokens": tokens,
            "max_requests_per_batch": settings.max_batch,
            "compile": self.options.engine_compile,
            "scheduler": config.scheduler_type,
            "prefix_sharing": settings.shared_prefixes,
            "eos_token_id": getattr(model.config, "eos_token_id", None),  # MLPerf's TEST06 counts its repeats
        }
        self.manager = model.init_continuous_batching(generation_config=generation, continuous_batching_config=config)
        self.manager.start()
        self.requests: dict[str, TokenRequest] = {}
        self.sent_first: set[str] = set()
        self.seen: dict[str, int] = {}  # tokens already streamed per request
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._reader = threading.Thread(target=self._read, name="accelbench-cb-reader", daemon=True)
        self._reader.start()

    def submit(self, requests: list[TokenRequest]) -> None:
        for r in requests:
            key = str(r.id)
            with self._lock:
                self.requests[key] = r
            self.manager.add_request(r.prompt, request_id=key, max_new_tokens=r.max_new_tokens, streaming=True)

    def stop(self) -> None:
        self._stopping.set()
        self._reader.join()
        self.manager.stop(block=True)

    def _read(self) -> None:
        while not self._stopping.is_set():
            out = self.manager.get_result(timeout=0.05)
            if out is None:
                if not self.manager.is_running() and not self._stopping.is_set():
                    error = RuntimeError("transformers' continuous batching stopped (its generation thread ended)")
                    with self._lock:
                        left, self.requests = list(self.requests.values()), {}
                    for r in left:
                        self.sink.failed(r, error)
                    return
                continue
            with self._lock:
                request = self.requests.get(out.request_id)
            if request is None:
                continue
            if out.error:
                with self._lock:
                    self.requests.pop(out.request_id, None)
                self.sink.failed(request, RuntimeError(out.error))
                continue
            if out.generated_tokens and out.request_id not in self.sent_first:
                self.sent_first.add(out.request_id)
                self.sink.first(request, out.generated_tokens[0])
                self.seen[out.request_id] = 1
            more = len(out.generated_tokens) - self.seen.get(out.request_id, len(out.generated_tokens))
            if more > 0:
                self.seen[out.request_id] += more
                self.sink.step(request, more)
            if out.is_finished():
                with self._lock:
                    self.requests.pop(out.request_id, None)
                self.sent_first.discard(out.request_id)
                self.seen.pop(out.request_id, None)
                self.sink.done(request, list(out.generated_tokens))
