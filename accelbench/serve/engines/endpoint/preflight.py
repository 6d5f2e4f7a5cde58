"""Before any load is sent: the server answers, speaks OpenAI's streaming API, and serves the model named.

Each way it can fail is one line saying what to fix (a :class:`UsageError`, exit 2). One two-token streaming
request proves the path the run will use: with vLLM's ``ignore_eos``/``min_tokens`` first, and again without where
the server refuses unknown fields (the record then says the output lengths were the server's choice).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from accelbench.errors import UsageError
from accelbench.serve.engines.endpoint.client import Answer, Failure, Target, error_words

if TYPE_CHECKING:
    from accelbench.serve.engines.endpoint.params import EndpointOptions

#: seconds each preflight call may take
PREFLIGHT_TIMEOUT = 30.0


def headers_of(params: "EndpointOptions") -> dict[str, str]:
    if not params.api_key_env:
        return {}
    key = os.environ.get(params.api_key_env)
    if not key:
        raise UsageError(f"--api-key-env {params.api_key_env}: that environment variable is unset or empty")
    return {"Authorization": f"Bearer {key}"}


def _call(url: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> tuple[int, bytes, str]:
    """(status, body, content type) of a GET (or a POST of ``body``); a server that cannot be reached raises."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers | {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=PREFLIGHT_TIMEOUT) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")
    except (urllib.error.URLError, OSError) as exc:
        why = getattr(exc, "reason", exc)
        raise UsageError(f"cannot reach {url}: {why}; start the server or fix --url") from None


def served_models(url: str, headers: dict[str, str]) -> tuple[list[str] | None, str]:
    """The model names ``GET /models`` lists (None where the server gives no usable list), and what it said."""
    status, body, _ = _call(f"{url}/models", headers)
    if status in (401, 403):
        raise UsageError(f"{url} refused the request ({error_words(status, body)}): give its key with --api-key-env")
    if status != 200:
        return None, error_words(status, body)
    try:
        data = json.loads(body)
        return [str(m["id"]) for m in data["data"]], ""
    except (ValueError, KeyError, TypeError):
        return None, f"GET /models answered {body[:80].decode('utf-8', 'replace')!r}, not OpenAI's model list"


def _resolve_model(params: "EndpointOptions", listed: list[str] | None, said: str) -> str:
    if params.served_model:
        if listed is not None and listed and params.served_model not in listed:
            raise UsageError(
                f"{params.url} does not serve {params.served_model!r}; it serves {', '.join(listed)}: "
                "fix --served-model"
            )
        return params.served_model
    if listed is not None and len(listed) == 1:
        return listed[0]
    if listed:
        raise UsageError(f"{params.url} serves {', '.join(listed)}: name one with --served-model")
    raise UsageError(f"name the served model with --served-model ({params.url} lists none: {said or 'empty list'})")


def _try_stream(target: Target) -> str | None:
    """One two-token request; None when it streamed an answer, else what went wrong."""
    status, body, kind = _call(target.path, target.headers, target.body("hello", 2, ignore_eos=True))
    if status != 200:
        return error_words(status, body)
    answer = Answer()
    try:
        for line in body.splitlines():
            answer.feed(line, target.api, lambda: None)
        answer.ended(content=False)  # two tokens of a random model may be special ones that print nothing
    except Failure as exc:
        if b"data:" not in body:
            return f"POST {target.path} answered {kind or 'no content type'} {body[:80]!r}, not an event stream"
        return str(exc)
    return None


def completions_sent(extensions: bool) -> int:
    """The completion requests one :func:`preflight` that resolved its target sent the server: its two-token request,
    and the same again without vLLM's extensions where the server refused them (``Target.extensions`` false)."""
    return 1 if extensions else 2


def preflight(params: "EndpointOptions") -> Target:
    """The resolved target, or a UsageError naming what to fix; nothing of the run's load has been sent."""
    url = params.url.rstrip("/")
    headers = headers_of(params)
    listed, said = served_models(url, headers)
    target = Target(url, _resolve_model(params, listed, said), params.api, headers)
    wrong = _try_stream(target)
    if wrong is not None and wrong.startswith("HTTP 4"):
        plain = Target(target.url, target.model, target.api, headers, extensions=False)
        if _try_stream(plain) is None:  # it refused the extensions only: lengths are then the server's
            return plain
    if wrong is not None:
        raise UsageError(f"{url} is not serving {target.model!r} through OpenAI's {params.api} API: {wrong}")
    return target


def load_tokenizer(options: "EndpointOptions", checkpoint: str) -> Any:
    """The served model's tokenizer (``--tokenizer``, else ``--checkpoint``'s), read offline."""
    from accelbench.serve.sources.tokenizer import load_tokenizer as read

    return read(options.tokenizer or checkpoint)
