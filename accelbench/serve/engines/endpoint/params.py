"""The endpoint engine's settings (torch-free): where the server is, what it serves, how to reach it.

They are the engine's own ``Options`` (:class:`accelbench.serve.engines.endpoint.engine.EndpointEngine`), so they are
flags of ``accelbench infer`` for language models, validated, recorded and part of a record's key like every other
setting, and refused with any other engine rather than ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from accelbench.errors import UsageError
from accelbench.params import NoOptions, opt

#: an endpoint run's precision where none was given: the server's own, which accelbench cannot see
UNSTATED = "unstated"
#: an endpoint run's device: the server, named by where it answers (``server at HOST:PORT``)
SERVER_AT = "server at "


def server_device(url: str) -> str:
    """The device an endpoint record names: the server, at its address (``server at 127.0.0.1:8000``)."""
    return SERVER_AT + urlparse(url).netloc


@dataclass(frozen=True)
class EndpointOptions(NoOptions):
    url: str = opt(
        "",
        "the OpenAI-compatible API's base address, e.g. http://127.0.0.1:8000/v1 (vLLM, SGLang, "
        "TensorRT-LLM, TGI, llama.cpp, transformers serve)",
        sweep=False,
        metavar="URL",
    )
    served_model: str = opt("", "the model name the server serves (empty: the one GET /models lists)", sweep=False)
    api: str = opt("completions", "the API each request goes to", choices=("completions", "chat"), sweep=False)
    api_key_env: str = opt(
        "",
        "the environment variable holding the API key (sent as a Bearer token)",
        sweep=False,
        metavar="VAR",
    )
    tokenizer: str = opt(
        "",
        "the served model's tokenizer folder (writes the prompts; counts output tokens where "
        "the server reports no usage); empty: --checkpoint's",
        sweep=False,
        metavar="DIR",
    )
    server_devices: int = opt(1, "accelerators behind the server (recorded; divides tokens/s per device)", sweep=False)
    request_timeout: float = opt(600.0, "seconds a request may take before it is a failed query", sweep=False)
    accuracy_target: str = opt(
        "",
        "--mode accuracy: the ROUGE the answers to --prompts are gated against at 99%/99.9%: "
        "mlperf (the preset's published MLPerf target, meant for MLPerf's whole data set) or "
        "rouge1=R,rouge2=R,rougeL=R[,rougeLsum=R][,tokens_per_sample=N] (empty: scored, not gated)",
        sweep=False,
        metavar="TARGET",
    )

    def check(self) -> None:
        """A usable address; the server's devices and the request timeout positive; a ROUGE target that parses."""
        if not self.url:
            raise UsageError("--engine endpoint needs --url http://HOST:PORT/v1 (the server's OpenAI API)")
        parsed = urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(f"--url {self.url!r} is not an http(s) address: give e.g. http://127.0.0.1:8000/v1")
        if self.server_devices < 1:
            raise UsageError(f"--server-devices must be at least 1, got {self.server_devices}")
        if self.request_timeout <= 0:
            raise UsageError(f"--request-timeout must be positive, got {self.request_timeout:g}")


def labels(settings: dict[str, Any]) -> dict[str, Any]:
    """An endpoint run measures the server, so where ``--device`` and ``--precision`` are left at auto its record
    names the server (``server at HOST:PORT``) and ``unstated``: a suite entry is stored in this form, and a failed
    or skipped record takes the entry's parameters, so every outcome of one server carries one label."""
    d = dict(settings)
    if d.get("device") == "auto" and urlparse(str(d.get("url", ""))).netloc:
        d["device"] = server_device(str(d["url"]))
    if d.get("precision") == "auto":
        d["precision"] = UNSTATED
    return d


def unlabel(settings: dict[str, Any]) -> dict[str, Any]:
    """The recorded form read back (a stored entry, a record's parameters): ``server at ...`` and ``unstated`` are
    ``auto`` again, what the run resolves (the client's own device, the server's precision)."""
    d = dict(settings)
    if str(d.get("device", "")).startswith(SERVER_AT):
        d["device"] = "auto"
    if d.get("precision") == UNSTATED:
        d["precision"] = "auto"
    return d
