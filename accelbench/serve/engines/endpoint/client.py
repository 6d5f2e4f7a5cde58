"""One streaming request to an OpenAI-compatible server, and what it gave: when each content chunk came, the text,
the server's token counts, or the server's own words when it failed.

The request is read as Server-Sent Events (``data: {...}`` lines, ``data: [DONE]`` at the end), as every
OpenAI-style server streams them (vLLM, SGLang, TensorRT-LLM's server, TGI, llama.cpp, ``transformers serve``).
A chunk *carries content* when its text (completions) or delta content (chat) is not empty; a role-only first
chunk does not, so time to first token is the first chunk a reader would see.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

#: characters of a server's error body kept in a failure's message
WORDS = 300


@dataclass(frozen=True)
class Target:
    """Where and how requests go: the resolved endpoint (preflight checked it answers)."""

    url: str  # the API's base, ending in /v1
    model: str  # the name the server serves
    api: str  # completions or chat
    headers: dict[str, str] = field(default_factory=dict)
    #: vLLM/SGLang's ``ignore_eos`` and ``min_tokens``, sent where the server accepts them (preflight tried)
    extensions: bool = True

    @property
    def path(self) -> str:
        return f"{self.url}/{'chat/completions' if self.api == 'chat' else 'completions'}"

    def body(self, text: str, max_tokens: int, ignore_eos: bool) -> dict[str, Any]:
        """The JSON of one greedy streaming request for ``max_tokens`` tokens."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        if ignore_eos and self.extensions:
            body |= {"ignore_eos": True, "min_tokens": max_tokens}
        return body


class Failure(Exception):
    """A request the server did not answer in full; the message is what it said (or what happened)."""

    plain = True  # the message needs no exception name before it


def error_words(status: int, body: bytes) -> str:
    """``HTTP 404: <the server's message>``: its ``error.message`` or ``detail`` where the body is JSON."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            text = str(err["message"])
        elif isinstance(err, str):
            text = err
        elif data.get("detail"):
            text = str(data["detail"])
        elif data.get("message"):
            text = str(data["message"])
    return f"HTTP {status}: {' '.join(text.split())[:WORDS] or '(empty body)'}"


def _detail(usage: dict[str, Any], part: str, key: str, before: int | None) -> int | None:
    """``usage[part][key]`` where the server reports it as a count, else what was read before."""
    details = usage.get(part)
    value = details.get(key) if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else before


@dataclass
class Answer:
    """What one stream gave, as it arrives (``on_content`` is called at each chunk carrying content)."""

    text: list[str] = field(default_factory=list)
    chunks: int = 0  # chunks carrying content
    completion_tokens: int | None = None  # the server's usage, where it reports it
    prompt_tokens: int | None = None
    #: prompt tokens the server served from its prefix cache (``usage.prompt_tokens_details.cached_tokens``)
    cached_tokens: int | None = None
    #: output tokens a reasoning model spent thinking (``usage.completion_tokens_details.reasoning_tokens``)
    reasoning_tokens: int | None = None
    #: chunks of reasoning (chat's ``reasoning_content`` or ``reasoning``) before and among the answer's
    reasoning_chunks: int = 0
    #: seconds from the request's send to the first chunk of the answer itself (set by the engine)
    first_answer: float | None = None
    finish_reason: str | None = None
    done: bool = False  # [DONE] seen

    def feed(
        self, line: bytes, api: str, on_content: Callable[[], None], on_answer: Callable[[], None] | None = None
    ) -> None:
        """One line of the stream; raises :class:`Failure` on an error event. ``on_content`` is called at each
        chunk of text (reasoning or answer: a token either way), ``on_answer`` at each chunk of the answer itself."""
        line = line.strip()
        if not line.startswith(b"data:"):
            return  # blank separators, comments (": ping"), event names
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            raise Failure(f"not an OpenAI stream event: {data[:80].decode('utf-8', 'replace')!r}") from None
        if not isinstance(event, dict):
            raise Failure(f"not an OpenAI stream event: {data[:80].decode('utf-8', 'replace')!r}")
        if event.get("error"):
            err = event["error"]
            raise Failure(f"server error mid-stream: {err.get('message', err) if isinstance(err, dict) else err}")
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.cached_tokens = _detail(usage, "prompt_tokens_details", "cached_tokens", self.cached_tokens)
            self.reasoning_tokens = _detail(
                usage, "completion_tokens_details", "reasoning_tokens", self.reasoning_tokens
            )
        for choice in event.get("choices") or ():
            thinking = False
            if api == "chat":
                delta = choice.get("delta") or {}
                piece = delta.get("content") or ""
                if not piece:
                    piece = delta.get("reasoning_content") or delta.get("reasoning") or ""
                    thinking = bool(piece)
            else:
                piece = choice.get("text") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            if piece:
                self.chunks += 1
                on_content()
                if thinking:
                    self.reasoning_chunks += 1
                else:
                    self.text.append(piece)
                    if on_answer is not None:
                        on_answer()

    def ended(self, content: bool = True) -> None:
        """The stream closed: raises :class:`Failure` when it closed before the answer was finished (or, with
        ``content``, finished without any: no first token to time)."""
        if not (self.done or self.finish_reason):
            raise Failure(f"the server closed the stream after {self.chunks} content chunks, without a finish")
        if content and not self.chunks and not self.completion_tokens:
            # a stream of no text whose usage counts tokens is an answer: a server may not stream tokens that
            # decode to no text (transformers serve, a small vocabulary's special tokens)
            raise Failure(f"the server finished ({self.finish_reason or '[DONE]'}) without any content")
