"""``static``: batched ``generate`` with a static KV cache, the engine MLPerf's first llama2-70b reference SUT used.

Requests wait in a queue; the scheduler takes up to ``max_batch`` of them, left-pads their prompts and decodes
them together to the longest one's length. A streamer sees each step's tokens, so each request's first token
and its own completion (at its own ``max_new_tokens``, mid-batch when it is shorter) reach LoadGen when they
happen: no request is held until its batch ends.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from accelbench.infer.tokens.engines import CompileOptions, EngineSettings, QueuedEngine, Sink, TokenRequest

if TYPE_CHECKING:
    import torch


#: compiled: prompt widths and output lengths are rounded up to a multiple of these many tokens (the static
#: cache holds both, so either changes the compiled shapes)
BUCKET, OUTPUT_BUCKET = 64, 16


def no_eos(config: Any) -> int:
    """An end-of-sequence id no token has (one past the vocabulary): ``generate`` then runs to ``max_new_tokens``
    with no logit masked and, unlike a negative id, no warning on every call."""
    return int(config.vocab_size)


class StaticBatch(QueuedEngine):
    name = "static"
    Options = CompileOptions
    options: CompileOptions

    def start(self, model: Any, device: "torch.device", sink: Sink, settings: EngineSettings) -> None:
        from transformers import GenerationConfig

        self.generation = GenerationConfig(
            do_sample=False,
            pad_token_id=0,
            # ignore_eos as vLLM's: generation goes on past an end of sequence, whose logit is left alone (None
            # would take the model's EOS and min_new_tokens would then mask it, changing the greedy tokens)
            eos_token_id=no_eos(model.config) if settings.ignore_eos else model.config.eos_token_id,
            cache_implementation="static",
            # transformers compiles a static-cache generate by itself on some accelerators (CUDA graphs on
            # cuda): the record says whether the step was compiled, so it is compiled when asked, everywhere
            disable_compile=not self.options.engine_compile,
        )
        if self.options.engine_compile:
            from transformers import CompileConfig

            # Inductor's kernels without CUDA graph trees: the engine generates from its scheduler thread, and
            # graph trees are not safe off the thread that imported inductor (pytorch#123177)
            compile_config = CompileConfig(fullgraph=False, dynamic=False, mode="default")
            # generate compiles on its own accelerators only unless told to (a CPU is a device like any other here)
            compile_config._compile_all_devices = True  # type: ignore[assignment]  # transformers declares it None
            self.generation.compile_config = compile_config
        self.facts = {
            "engine": self.name,
            "max_batch": settings.max_batch,
            "max_wait_ms": settings.max_wait * 1000,
            "cache": "static",
            "kv_capacity_tokens": settings.max_batch * settings.longest,  # a full batch of the longest requests
            "compile": self.options.engine_compile,
            **({"compile_mode": self.generation.compile_config.mode} if self.options.engine_compile else {}),
            "padding": (
                f"left, to a multiple of {BUCKET} tokens (outputs to {OUTPUT_BUCKET}), the batch filled to "
                f"{settings.max_batch} rows (one compiled shape per bucket)"
                if self.options.engine_compile
                else "left, to the batch's longest prompt"
            ),
        }
        super().start(model, device, sink, settings)

    def serve(self, batch: list[TokenRequest]) -> None:
        import torch

        rows, width, longest = shape(batch, self.settings, self.options.engine_compile)
        ids = torch.zeros((rows, width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i in range(rows):  # rows past the batch repeat its first request; their tokens go nowhere
            r = batch[i] if i < len(batch) else batch[0]
            ids[i, width - len(r.prompt) :] = torch.tensor(r.prompt)
            mask[i, width - len(r.prompt) :] = 1
        generation = copy.copy(self.generation)  # this batch's lengths, on a copy: one config object, not two
        generation.max_new_tokens = longest
        streamer = _Streamer(batch, self.sink)
        with torch.inference_mode():
            self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                generation_config=generation,
                streamer=streamer,
            )
        streamer.end()


def shape(batch: list[TokenRequest], settings: EngineSettings, compiled: bool) -> tuple[int, int, int]:
    """Rows, prompt width and new tokens of one ``generate`` call: the batch's own, or, compiling, rounded up to
    ``BUCKET`` tokens and ``max_batch`` rows, so the compiled step sees a few shapes, not one per batch (a compile
    is seconds: on a 2-core CPU 18 s for the tiny llama3.1-8b, and every new shape is another)."""
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
