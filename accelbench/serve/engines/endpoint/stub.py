"""A stub OpenAI-compatible server that streams made-up words, at once or spread over time: what the client alone
sustains, and each way a server can misbehave (errors, early closes, slow answers, not OpenAI's API), on demand.

No model runs: every answer is ``max_tokens`` chunks of one word, with the usage OpenAI's servers report.
``python -m accelbench.serve.engines.endpoint.stub --port P`` serves until killed (``--help`` lists the rest).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from aiohttp import web

MODEL = "stub"


@dataclass(frozen=True)
class Behaviour:
    """How the stub answers: every ``fail_every``-th request an HTTP 500, every ``close_every``-th stream closed
    after two chunks, ``delay`` seconds before each answer, ``html`` a web page instead of the API; each chunk
    is ``word`` (an answer whose quality a test can know: every word of it the same), or nothing (``silent``)."""

    fail_every: int = 0
    close_every: int = 0
    delay: float = 0.0
    html: bool = False
    word: str = "word"
    #: no text streamed, only the finish with the usage's count (a server that does not stream tokens whose text
    #: is empty: transformers serve with a small vocabulary's special tokens)
    silent: bool = False
    #: prompt tokens of each answer's usage said served from a prefix cache (``prompt_tokens_details.cached_tokens``;
    #: None: the usage says nothing of a cache, as a server without one)
    cached_tokens: int | None = None
    #: a prefix cache of blocks of this many prompt tokens (0: none), as vLLM's: a prompt's whole blocks that follow
    #: the same beginning as an earlier prompt's are reported cached; never evicts
    prefix_block: int = 0
    #: the served model's tokenizer folder, which counts the prompt's tokens (empty: a token a UTF-8 byte)
    tokenizer: str = ""
    #: the first ``reasoning`` chunks of a chat answer are a reasoning model's thinking (``reasoning_content``),
    #: counted in ``completion_tokens_details.reasoning_tokens``
    reasoning: int = 0
    #: every ``eos_every``-th answer ends at its end of sequence after its first token, whatever ``max_tokens`` asks
    #: (a model that says little), and ``ignore_eos``/``min_tokens`` are refused as unknown fields, as ``transformers
    #: serve`` refuses them (0: answers are always ``max_tokens`` long and the extensions taken)
    eos_every: int = 0
    #: seconds between one chunk and the next (0: all at once), as a server that decodes a token a step sends them
    chunk_delay: float = 0.0
    #: ``/metrics`` in Prometheus' text format: ``vllm:time_to_first_token_seconds``, timed from the answer's start
    #: (after ``delay``: a front end that queued the request outside the engine's clock) to its first chunk
    metrics: bool = False


def app(behaviour: Behaviour) -> Any:
    """The stub's aiohttp application: the routes of OpenAI's API it answers, and ``/metrics``."""
    from aiohttp import web

    stub = _Stub(behaviour)
    application = web.Application()
    application.router.add_get("/v1/models", stub.models)
    application.router.add_post("/v1/completions", stub.complete)
    application.router.add_post("/v1/chat/completions", stub.complete)
    application.router.add_get("/metrics", stub.metrics)
    return application


class _Stub:
    """What the stub keeps between requests: its TTFT histogram, the requests counted, the prefix blocks seen."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.ttft = _histogram() if behaviour.metrics else None
        self.counter = itertools.count(1)
        self.seen: set[int] = set()
        self.tokenize = _tokenizer(behaviour.tokenizer)

    def prompt_usage(self, body: dict[str, Any], chat: bool) -> tuple[int, int | None]:
        """The prompt's tokens, and those its prefix cache held (None: no cache to report)."""
        if chat:
            text = "".join(str(m.get("content") or "") for m in body.get("messages") or [])
        else:
            prompt = body.get("prompt")
            text = prompt if isinstance(prompt, str) else ""
        ids = self.tokenize(text)
        if not self.behaviour.prefix_block:
            return len(ids), self.behaviour.cached_tokens
        from accelbench.serve.sources.prefix import block_chain

        chain = block_chain(ids, self.behaviour.prefix_block)
        hits = next((i for i, h in enumerate(chain) if h not in self.seen), len(chain))
        self.seen.update(chain)
        return len(ids), hits * self.behaviour.prefix_block

    async def models(self, request: "web.Request") -> "web.StreamResponse":
        from aiohttp import web

        if self.behaviour.html:
            return _web_page()
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def complete(self, request: "web.Request") -> "web.StreamResponse":
        """A completion, or the failure the behaviour asks for (a web page, an HTTP error, a refused field)."""
        from aiohttp import web

        behaviour = self.behaviour
        if behaviour.html:
            return _web_page()
        body = await request.json()
        if body.get("model") != MODEL:
            return web.json_response({"error": {"message": f"model {body.get('model')!r} not found"}}, status=404)
        if behaviour.eos_every and ({"ignore_eos", "min_tokens"} & set(body)):
            unknown = sorted({"ignore_eos", "min_tokens"} & set(body))
            return web.json_response({"detail": f"Unexpected fields in the request: {unknown}"}, status=422)
        n = next(self.counter)
        if behaviour.fail_every and n % behaviour.fail_every == 0:
            return web.json_response({"error": {"message": "stub: induced failure"}}, status=500)
        if behaviour.delay:
            await asyncio.sleep(behaviour.delay)
        return await self._stream(request, body, n)

    async def _stream(self, request: "web.Request", body: dict[str, Any], n: int) -> "web.StreamResponse":
        """The ``n``-th answer's chunks, one word each, the last with the usage (or closed early, on demand)."""
        from aiohttp import web

        behaviour = self.behaviour
        begun = time.perf_counter()
        chat = request.path.endswith("chat/completions")
        prompt_tokens, cached = self.prompt_usage(body, chat)
        tokens = int(body.get("max_tokens") or 16)
        stopped = bool(behaviour.eos_every) and n % behaviour.eos_every == 0
        tokens = 1 if stopped else tokens
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(tokens):
            if behaviour.close_every and n % behaviour.close_every == 0 and i == 2:
                return resp  # the stream ends without a finish
            last = i == tokens - 1
            if behaviour.silent and not last:
                continue
            event = self._chunk(n, i, chat, last, stopped)
            if last:
                event["usage"] = self._usage(prompt_tokens, cached, tokens, chat)
            if i and behaviour.chunk_delay:
                await asyncio.sleep(behaviour.chunk_delay)
            await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            if self.ttft is not None and (i == 0 or (behaviour.silent and last)):
                self.ttft[1].observe(time.perf_counter() - begun)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    def _chunk(self, n: int, i: int, chat: bool, last: bool, stopped: bool) -> dict[str, Any]:
        """The ``i``-th chunk of the ``n``-th answer: a word (a reasoning model's thinking first, where asked)."""
        behaviour = self.behaviour
        text = "" if behaviour.silent else " " + behaviour.word
        thinking = chat and i < behaviour.reasoning
        piece = {"delta": {"reasoning_content" if thinking else "content": text}} if chat else {"text": text}
        choice = piece | {"index": 0, "finish_reason": ("stop" if stopped else "length") if last else None}
        return {"id": str(n), "choices": [choice]}

    def _usage(self, prompt_tokens: int, cached: int | None, tokens: int, chat: bool) -> dict[str, Any]:
        """The usage an answer's last chunk reports, as OpenAI's servers (and vLLM's cache and reasoning counts)."""
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": tokens,
            "total_tokens": tokens + prompt_tokens,
        }
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if chat and self.behaviour.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": min(self.behaviour.reasoning, tokens)}
        return usage

    async def metrics(self, request: "web.Request") -> "web.StreamResponse":
        from aiohttp import web

        if self.ttft is None:
            return web.Response(status=404, text="404: Not Found")
        from prometheus_client import generate_latest

        return web.Response(body=generate_latest(self.ttft[0]), content_type="text/plain")


def _web_page() -> "web.Response":
    """What a server that is not OpenAI's API answers: a web page."""
    from aiohttp import web

    return web.Response(text="<html><body>welcome</body></html>", content_type="text/html")


def _histogram() -> Any:
    """A registry of the stub's own, holding its TTFT histogram under vLLM's name."""
    from prometheus_client import CollectorRegistry, Histogram

    registry = CollectorRegistry()
    return registry, Histogram(
        "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", registry=registry
    )


def _tokenizer(folder: str) -> Any:
    """The prompt's token ids by the served model's tokenizer, or its UTF-8 bytes where none is given."""
    if not folder:
        return lambda text: list(text.encode())
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return lambda text: tok(text, add_special_tokens=False)["input_ids"]


@contextlib.contextmanager
def serving(behaviour: Behaviour = Behaviour()) -> Iterator[str]:
    """The stub on a free loopback port in a thread of this process, until the block ends; yields its …/v1."""
    from aiohttp import web

    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def open_() -> None:
        runner = web.AppRunner(app(behaviour), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(open_())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="accelbench-stub", daemon=True)
    thread.start()
    started.wait(30)
    try:
        yield f"http://127.0.0.1:{holder['port']}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def main() -> None:
    from aiohttp import web

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between an answer's chunks")
    parser.add_argument("--metrics", action="store_true", help="serve its TTFT histogram at /metrics")
    parser.add_argument(
        "--prefix-block", type=int, default=0, help="keep a prefix cache of blocks of this many prompt tokens"
    )
    parser.add_argument("--tokenizer", default="", help="the served model's tokenizer folder, to count prompt tokens")
    parser.add_argument("--reasoning", type=int, default=0, help="the first N chunks of a chat answer are reasoning")
    parser.add_argument("--exit-after", type=float, default=0.0, help="stop serving after this many seconds (0: never)")
    parser.add_argument(
        "--eos-every", type=int, default=0, help="end every Nth answer after one token; refuse ignore_eos, min_tokens"
    )
    ns = parser.parse_args()
    if ns.exit_after > 0:  # a stub started in the background ends by itself
        import os

        threading.Timer(ns.exit_after, os._exit, args=(0,)).start()
    behaviour = Behaviour(
        delay=ns.delay, prefix_block=ns.prefix_block, tokenizer=ns.tokenizer, reasoning=ns.reasoning,
        eos_every=ns.eos_every, chunk_delay=ns.chunk_delay, metrics=ns.metrics,
    )  # fmt: skip
    web.run_app(app(behaviour), host="127.0.0.1", port=ns.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
