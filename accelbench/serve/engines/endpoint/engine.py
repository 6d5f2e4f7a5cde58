"""``--engine endpoint``: each LoadGen request becomes one streaming HTTP request to an OpenAI-compatible server.

The server is the system under test; this engine is its client. One asyncio loop on its own thread holds the
kept-alive connections, and LoadGen's callback and accelbench's own driver hand requests to it
(:meth:`EndpointEngine.event_loop`), so a request's send and its chunks are stamped on one thread. The client is
measured too (:class:`ClientWatch`), so a run the client limited says so, and the server's own clock is read
where it exposes one (:mod:`.server_clock`).
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.errors import UsageError
from accelbench.results.details import EngineFacts
from accelbench.serve.engines.base import Engine, EngineSettings, RunView, Sink, TokenRequest
from accelbench.serve.engines.endpoint import params as options_of
from accelbench.serve.engines.endpoint.client import Answer, Failure, error_words
from accelbench.serve.engines.endpoint.params import EndpointOptions, server_device
from accelbench.serve.engines.endpoint.server_clock import Reading
from accelbench.serve.engines.endpoint.watch import ClientWatch

if TYPE_CHECKING:
    import torch


#: Server and interactive: connections at least (each arrival is sent at once, as a reader's request would be;
#: ``--batch-size`` bounds the requests in flight of Offline and SingleStream, a fixed concurrency)
OPEN_LOOP_CONNECTIONS = 1024
#: seconds an idle connection is kept for reuse (under the 5 s after which uvicorn closes one)
KEEPALIVE = 3.0
#: Offline: the fewest requests, in waves of ``--batch-size``: one wave's tokens/s is a batch's ramp and tail, never
#: the server's steady state; four keep a request in flight at every moment of the run but its last stretch
OFFLINE_MIN_WAVES = 4


class Usage:
    """What the server's usage said over a LoadGen run's answers, and when each answer (not its reasoning) began:
    the prefix cache's hit rate (cached over prompt tokens, where the server reports cached tokens), a reasoning
    model's thinking tokens apart from its answer's, and the time to the first answer token beside the first token's
    (LoadGen's TTFT counts a reasoning token as the first)."""

    def __init__(self) -> None:
        self.answers = 0
        self.prompt = 0  # prompt tokens of the answers whose usage gave them
        self.cached: int | None = None  # None: no answer's usage reported cached tokens
        self.cached_prompt = 0  # prompt tokens of the answers that did
        self.reasoning: int | None = None
        self.completion = 0  # completion tokens of the answers that reported reasoning tokens
        self.reasoning_chunks = 0
        self.first_answer: list[float] = []

    def add(self, answer: Answer) -> None:
        self.answers += 1
        self.prompt += answer.prompt_tokens or 0
        if answer.cached_tokens is not None and answer.prompt_tokens:
            self.cached = (self.cached or 0) + answer.cached_tokens
            self.cached_prompt += answer.prompt_tokens
        if answer.reasoning_tokens is not None:
            self.reasoning = (self.reasoning or 0) + answer.reasoning_tokens
            self.completion += answer.completion_tokens or 0
        self.reasoning_chunks += answer.reasoning_chunks
        if answer.first_answer is not None:
            self.first_answer.append(answer.first_answer)

    def report(self) -> dict[str, Any]:
        if not self.answers:
            return {}
        out: dict[str, Any] = {
            "prefix_cache": (
                {
                    "cached_tokens": self.cached,
                    "prompt_tokens": self.cached_prompt,
                    "hit_rate": self.cached / self.cached_prompt if self.cached_prompt else None,
                    "source": "the server's usage.prompt_tokens_details.cached_tokens",
                }
                if self.cached is not None
                else "not reported (the server's usage carries no prompt_tokens_details.cached_tokens)"
            )
        }
        if self.reasoning is not None or self.reasoning_chunks:
            ordered = sorted(self.first_answer)
            out["reasoning"] = {
                "reasoning_tokens": self.reasoning,
                "completion_tokens": self.completion if self.reasoning is not None else None,
                "reasoning_chunks": self.reasoning_chunks,
                "first_answer_ms_p50": 1000 * ordered[len(ordered) // 2] if ordered else None,
                "first_answer_ms_p99": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
                if ordered
                else None,
                "answers_with_text": len(ordered),
                "source": "usage.completion_tokens_details.reasoning_tokens; chunks of reasoning_content or "
                "reasoning; first answer timed from the request's send to its first content chunk",
            }
        return out


class EndpointFacts(EngineFacts, total=False):
    """What the client measured against: the API spoken, the devices the server was said to use, the tokenizer that
    wrote the prompts, where the output token counts came from, and the answers that streamed no text."""

    api: str
    server_devices: int
    tokenizer: str
    output_token_count: str
    answers_without_streamed_text: int
    ttft_of_those: str


class EndpointEngine(Engine):
    """A client of an OpenAI-compatible server (``--url``): the server's tokens, timed as they arrive here."""

    name = "endpoint"
    about = "an OpenAI-compatible server at --url"
    extra = "endpoint"
    runs_model = False
    remote = True
    Options = EndpointOptions
    options: EndpointOptions
    facts: EndpointFacts

    @classmethod
    def check_run(cls, params: RunView, options: EndpointOptions) -> None:
        """The served model's tokenizer named; accuracy scored on a prompt file's answers, gated only in accuracy."""
        where = options.tokenizer or params.checkpoint
        if not where:
            raise UsageError(
                "--engine endpoint needs the served model's tokenizer: --tokenizer DIR (a folder with "
                "tokenizer.json or its tokenizer files) or --checkpoint DIR"
            )
        if not Path(where).expanduser().is_dir():
            raise UsageError(f"tokenizer folder {where} does not exist")
        if params.mode == "accuracy" and not params.prompts:
            raise UsageError(
                "an endpoint's accuracy is ROUGE on a prompt file's reference answers: give --prompts FILE (the "
                "served weights are the server's, so there is no FP32 model here to compare tokens with)"
            )
        if options.accuracy_target and params.mode != "accuracy":
            raise UsageError("--accuracy-target gates --mode accuracy; add --mode accuracy or drop it")
        if options.accuracy_target:
            from accelbench.serve.quality import target

            target(options.accuracy_target, params.model)

    @classmethod
    def labels(cls, settings: dict[str, Any]) -> dict[str, Any]:
        return options_of.labels(settings)

    @classmethod
    def unlabel(cls, settings: dict[str, Any]) -> dict[str, Any]:
        return options_of.unlabel(settings)

    @classmethod
    def devices(cls, options: EndpointOptions) -> int:
        return options.server_devices

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        """The server's model, not the preset's, where the record names it."""
        return [f"serving {settings['served_model']}"] if settings.get("served_model") else []

    @classmethod
    def min_requests(cls, params: RunView) -> int:
        """The fewest requests LoadGen's run may issue (its ``min_query_count`` floor; 0: no floor of this engine's):
        in Offline, :data:`OFFLINE_MIN_WAVES` waves of ``--batch-size``, so the figure is never one batch's."""
        return OFFLINE_MIN_WAVES * params.batch_size if params.scenario == "offline" else 0

    def unavailable(self) -> str | None:
        import importlib.util

        for module, why in (("aiohttp", "its HTTP client"), ("transformers", "the tokenizer that writes prompts")):
            if importlib.util.find_spec(module) is None:
                return f"the endpoint engine needs {module} ({why}): pip install 'accelbench[endpoint]'"
        return None

    def check(self, params: RunView) -> None:
        """The server answers, speaks OpenAI's API and serves the model: else one line (UsageError), before load."""
        from accelbench.serve.engines.endpoint.preflight import load_tokenizer, preflight

        preflight(self.options)
        load_tokenizer(self.options, params.checkpoint)  # a folder without a tokenizer: one line, not a failed record

    def configure(self, params: RunView) -> None:
        from accelbench.serve.engines.endpoint.preflight import load_tokenizer, preflight

        self.target = preflight(self.options)
        self.tokenizer = load_tokenizer(self.options, params.checkpoint)
        self.timeout = self.options.request_timeout
        self.vocab_size = len(self.tokenizer)
        self.facts |= {
            "device": server_device(self.target.url),  # as the entry states it: one label for every outcome
            "url": self.target.url,
            "served_model": self.target.model,
            "api": self.target.api,
            "server_devices": self.options.server_devices,
            "ignore_eos_sent": self.target.extensions,
            "tokenizer": self.options.tokenizer or params.checkpoint,
        }

    def resolved(self) -> dict[str, Any]:
        """The model the server said it serves (its /v1/models), as if ``--served-model`` named it."""
        return {"served_model": self.target.model}

    def local_processes(self) -> list[int]:
        """The processes listening on the server's port where it runs on this machine (a loopback or local address)."""
        return listening(self.target.url)

    def prompt_text(self, tokens: list[int]) -> str:
        """A prompt's tokens as the text sent (the server tokenizes it again; its own count is recorded)."""
        text: str = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return text

    # the Engine seam
    def start(self, model: Any, device: "torch.device", sink: Sink, settings: EngineSettings) -> None:
        self.sink, self.settings = sink, settings
        self.connections = max(settings.max_batch, OPEN_LOOP_CONNECTIONS if settings.open_loop else 0)
        self.watch = ClientWatch()
        self.counted: dict[str, int] = {"server usage": 0, "tokenizer": 0}
        #: answers whose stream carried no text (their tokens from the server's usage; their TTFT is their end)
        self.silent = 0
        #: each answered request's prompt tokens as the server counted them, and as they were sent (the same requests)
        self.prompt_tokens: list[int] = []
        self.sent_tokens: list[int] = []
        self.usage = Usage()
        #: each streamed answer's TTFT and TPOT (ms) by this client's clock since the last :meth:`measured`, set
        #: beside the server's own over the same requests; the server's histograms as last read
        self.client_ttft: list[float] = []
        self.client_tpot: list[float] = []
        self._server_read: Reading | str | None = None
        self._on_sent = getattr(sink, "wrote", None)  # a sink that times a request from its write
        self._texts: dict[int, tuple[list[int], str]] = {}
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, name="accelbench-endpoint", daemon=True)
        self._failed_start: BaseException | None = None
        self._thread.start()
        self._ready.wait()
        if self._failed_start is not None:
            raise self._failed_start

    def submit(self, requests: list[TokenRequest]) -> None:
        now = time.perf_counter()
        if threading.get_ident() == self._loop_thread:  # accelbench's driver, on this loop: no hand-over
            self._spawn(requests, now)
        else:
            self.loop.call_soon_threadsafe(self._spawn, requests, now)

    def event_loop(self) -> asyncio.AbstractEventLoop:
        return self.loop

    def preflight_requests(self) -> int:
        from accelbench.serve.engines.endpoint.preflight import completions_sent

        return completions_sent(self.target.extensions)

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(timeout=30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=30)
        self.facts["output_token_count"] = self._count_source()
        if self.silent:
            self.facts["answers_without_streamed_text"] = self.silent
            self.facts["ttft_of_those"] = "the end of the answer (no token was streamed before it)"

    def measured(self, arrivals: bool) -> dict[str, Any]:
        """The client's own figures since the last call (a LoadGen run's), and why it limited the run if it did
        (``arrivals``: requests came on LoadGen's schedule, Server, not all at once)."""
        report = self.watch.report(self.connections, arrivals)
        if self.prompt_tokens:
            report["server_prompt_tokens_mean"] = sum(self.prompt_tokens) / len(self.prompt_tokens)
            report["sent_prompt_tokens_mean"] = sum(self.sent_tokens) / len(self.sent_tokens)
            self.prompt_tokens, self.sent_tokens = [], []
        report |= self.usage.report()
        self.usage = Usage()
        report["server_clock"] = self._server_clock()
        return report

    def _server_clock(self) -> dict[str, Any]:
        """The server's histograms read now, their difference from the last read beside this client's means over
        the requests between (:func:`.server_clock.compare`); the first call only reads."""
        from accelbench.serve.engines.endpoint import server_clock

        now = server_clock.read(self.target.url, self.target.headers)
        before, self._server_read = self._server_read, now
        ttft, tpot, self.client_ttft, self.client_tpot = self.client_ttft, self.client_tpot, [], []
        if before is None:
            return {"not_reported": "no read before this run"}
        return server_clock.compare(server_clock.between(before, now), ttft, tpot)

    # the loop's thread
    def _run_loop(self) -> None:
        self._loop_thread = threading.get_ident()
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._open())
        except BaseException as exc:  # start() must not wait forever for a loop that never ran
            self._failed_start = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.close()

    async def _open(self) -> None:
        import aiohttp

        limit = self.connections
        # idle connections are closed before a server would close them (uvicorn, behind vLLM, SGLang and
        # transformers serve, closes them after 5 s): one it closed as it was reused fails the request
        connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, keepalive_timeout=KEEPALIVE)
        timeout = aiohttp.ClientTimeout(total=self.timeout, sock_connect=min(self.timeout, 30.0))
        self.session = aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=self.target.headers, raise_for_status=False
        )
        self.slots = asyncio.Semaphore(limit)
        self.watch.start(self.loop)

    async def _close(self) -> None:
        self.watch.stop()
        await self.session.close()

    def _spawn(self, requests: list[TokenRequest], submitted: float) -> None:
        for r in requests:
            self.loop.create_task(self._one(r, submitted))

    async def _one(self, request: TokenRequest, submitted: float) -> None:
        begun = time.perf_counter()
        # queued only if every connection was busy: timing a free semaphore would count the GIL and the OS
        # scheduler (a thread preempted between two lines on a busy host) as waiting for a connection
        full = self.slots.locked()
        async with self.slots:
            self.watch.waited(begun - submitted, time.perf_counter() - begun if full else 0.0)
            try:
                answer = await self._stream(request)
            except Failure as exc:
                self.sink.failed(request, exc)
                return
            except asyncio.TimeoutError:
                self.sink.failed(request, Failure(f"no complete answer within {self.timeout:g} s (--request-timeout)"))
                return
            except Exception as exc:  # aiohttp's connection errors: the server went away
                self.sink.failed(request, Failure(f"connection: {type(exc).__name__}: {exc}"))
                return
        tokens = self.tokenizer.encode("".join(answer.text), add_special_tokens=False)
        if answer.completion_tokens:
            count, source = answer.completion_tokens, "server usage"
        else:
            count, source = max(len(tokens), answer.chunks), "tokenizer"
        self.counted[source] += 1
        if answer.prompt_tokens:
            self.prompt_tokens.append(answer.prompt_tokens)
            self.sent_tokens.append(len(request.prompt))
        self.usage.add(answer)
        tokens = (tokens + [0] * count)[:count]  # LoadGen counts len(tokens): the count the record trusts
        self.sink.done(request, tokens)

    def _prompt(self, request: TokenRequest) -> str:
        """The prompt's text, decoded once per QSL sample (LoadGen issues a sample as the same list each time):
        decoding 1,024 tokens took 0.18 ms of the loop's CPU, a quarter of what a request cost it (0.72-0.81 ms
        a request before, 0.52-0.59 ms after: bench/endpoint_client.py --prompt-tokens 1024)."""
        hit = self._texts.get(request.index)
        if hit is not None and hit[0] is request.prompt:
            return hit[1]
        text = self.prompt_text(request.prompt)
        self._texts[request.index] = (request.prompt, text)
        return text

    async def _stream(self, request: TokenRequest) -> Answer:
        text = self._prompt(request)
        body = self.target.body(text, request.max_new_tokens, self.settings.ignore_eos)
        answer = Answer()
        started = [False]
        stamps = [0.0, 0.0]  # this client's first and last chunk (perf_counter)
        sent = 0.0  # stamped at each attempt's POST

        def content() -> None:
            stamps[1] = time.perf_counter()
            if started[0]:
                self.sink.step(request, 1)
            else:
                started[0] = True
                stamps[0] = stamps[1]
                self.sink.first(request, 0)

        def answering() -> None:  # the first chunk of the answer itself, after any reasoning
            if answer.first_answer is None:
                answer.first_answer = time.perf_counter() - sent
                told = getattr(self.sink, "answering", None)  # a sink that keeps each request's answer time
                if told is not None:
                    told(request)

        import aiohttp

        for attempt in range(2):
            answered = False
            sent = time.perf_counter()  # handed to the HTTP client, on a kept-alive connection where one is free
            if self._on_sent is not None:
                self._on_sent(request, sent)
            try:
                async with self.session.post(self.target.path, json=body) as resp:
                    answered = True
                    if resp.status != 200:
                        raise Failure(error_words(resp.status, await resp.content.read(4096)))
                    async for line in resp.content:
                        answer.feed(line, self.target.api, content, answering)
                        if answer.done:
                            break
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
                # a kept-alive connection the server closed as it was reused: the request never reached it
                # (no status came back), so it is sent once more on a new connection, and counted
                if answered or attempt:
                    raise
                self.watch.retried += 1
                continue
            break
        answer.ended()
        if started[0]:
            self.client_ttft.append(1e3 * (stamps[0] - sent))
            if answer.chunks > 1:
                self.client_tpot.append(1e3 * (stamps[1] - stamps[0]) / (answer.chunks - 1))
        if not started[0]:  # no text streamed, tokens counted by the server: its first token came by the end
            started[0] = True
            self.silent += 1
            self.sink.first(request, 0)
        return answer

    def _count_source(self) -> str:
        usage, counted = self.counted["server usage"], self.counted["tokenizer"]
        if usage and not counted:
            return "the server's usage (completion_tokens)"
        if counted and not usage:
            return "counted with the tokenizer (the server reported no usage)"
        if not (usage or counted):
            return "no request answered"
        return f"the server's usage for {usage} requests, the tokenizer for {counted}"


def listening(url: str) -> list[int]:
    """PIDs of this machine's processes listening on ``url``'s port at its host (empty: a remote host, or
    sockets this user may not read)."""
    import socket

    import psutil

    parsed = urllib.parse.urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parsed.hostname, port)}
        local = {a.address for nic in psutil.net_if_addrs().values() for a in nic} | {"0.0.0.0", "::"}
        if not addresses & local:
            return []
        found = psutil.net_connections(kind="tcp")
    except (OSError, psutil.Error):
        return []
    return sorted(
        {c.pid for c in found if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}
    )
