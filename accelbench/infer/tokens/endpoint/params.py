"""The flags of ``--engine endpoint`` (torch-free): where the server is, what it serves, how to reach it.

Declared once as a mixin of :class:`accelbench.infer.tokens.specs.LLMServeParams`, so they are validated, recorded and
part of a record's key like every other knob, and refused with any other engine rather than ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from accelbench.errors import UsageError
from accelbench.params import opt

ENDPOINT_KNOBS = (
    "url", "served_model", "api", "api_key_env", "tokenizer", "server_devices", "request_timeout", "accuracy_target",
)  # fmt: skip
#: an endpoint run's precision where none was given: the server's own, which accelbench cannot see
UNSTATED = "unstated"
#: an endpoint run's device: the server, named by where it answers (``server at HOST:PORT``)
SERVER_AT = "server at "


def server_device(url: str) -> str:
    """The device an endpoint record names: the server, at its address (``server at 127.0.0.1:8000``)."""
    return SERVER_AT + urlparse(url).netloc


@dataclass(frozen=True)
class EndpointParams:
    url: str = opt(
        "",
        "--engine endpoint: the OpenAI-compatible API's base address, e.g. http://127.0.0.1:8000/v1 (vLLM, SGLang, "
        "TensorRT-LLM, TGI, llama.cpp, transformers serve)",
        sweep=False,
        metavar="URL",
    )
    served_model: str = opt(
        "", "--engine endpoint: the model name the server serves (empty: the one GET /models lists)", sweep=False
    )
    api: str = opt(
        "completions", "--engine endpoint: the API each request goes to", choices=("completions", "chat"), sweep=False
    )
    api_key_env: str = opt(
        "",
        "--engine endpoint: the environment variable holding the API key (sent as a Bearer token)",
        sweep=False,
        metavar="VAR",
    )
    tokenizer: str = opt(
        "",
        "--engine endpoint: the served model's tokenizer folder (writes the prompts; counts output tokens where "
        "the server reports no usage); empty: --checkpoint's",
        sweep=False,
        metavar="DIR",
    )
    server_devices: int = opt(
        1, "--engine endpoint: accelerators behind the server (recorded; divides tokens/s per device)", sweep=False
    )
    request_timeout: float = opt(
        600.0, "--engine endpoint: seconds a request may take before it is a failed query", sweep=False
    )
    accuracy_target: str = opt(
        "",
        "--engine endpoint, --mode accuracy: the ROUGE the answers to --prompts are gated against at 99%/99.9%: "
        "mlperf (the preset's published MLPerf target, meant for MLPerf's whole data set) or "
        "rouge1=R,rouge2=R,rougeL=R[,rougeLsum=R][,tokens_per_sample=N] (empty: scored, not gated)",
        sweep=False,
        metavar="TARGET",
    )

    def to_dict(self) -> dict[str, Any]:
        """The parameters as a record states them. An endpoint run measures the server, so where ``--device`` and
        ``--precision`` are left at auto it records the server (``server at HOST:PORT``) and ``unstated``, as
        its ok record does: a suite entry is stored in this form, and a failed or skipped record takes the
        entry's parameters, so every outcome of one server carries one label, not ``auto`` on a failure."""
        d = dataclasses.asdict(self)
        if d.get("engine") == "endpoint" and urlparse(self.url).netloc:
            if d.get("device") == "auto":
                d["device"] = server_device(self.url)
            if d.get("precision") == "auto":
                d["precision"] = UNSTATED
        return d

    def __post_init__(self) -> None:
        """The recorded form read back (a stored entry, a record's parameters): ``server at ...`` and
        ``unstated`` are ``auto`` again, what the run resolves (the client's own device, the server's precision)."""
        if getattr(self, "engine", "") != "endpoint":
            return
        if str(getattr(self, "device", "")).startswith(SERVER_AT):
            object.__setattr__(self, "device", "auto")
        if getattr(self, "precision", "") == UNSTATED:
            object.__setattr__(self, "precision", "auto")

    def _check_endpoint(self, engine: str) -> None:
        """Endpoint flags only with ``--engine endpoint``; with it, a usable address and a tokenizer."""
        if engine != "endpoint":
            for knob in ENDPOINT_KNOBS:
                if getattr(self, knob) != self.__dataclass_fields__[knob].default:
                    flag = "--" + knob.replace("_", "-")
                    raise UsageError(f"{flag} applies to --engine endpoint, not --engine {engine}")
            return
        if not self.url:
            raise UsageError("--engine endpoint needs --url http://HOST:PORT/v1 (the server's OpenAI API)")
        parsed = urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(f"--url {self.url!r} is not an http(s) address: give e.g. http://127.0.0.1:8000/v1")
        where = self.tokenizer or getattr(self, "checkpoint", "")
        if not where:
            raise UsageError(
                "--engine endpoint needs the served model's tokenizer: --tokenizer DIR (a folder with "
                "tokenizer.json or its tokenizer files) or --checkpoint DIR"
            )
        if not Path(where).expanduser().is_dir():
            raise UsageError(f"tokenizer folder {where} does not exist")
        if self.server_devices < 1:
            raise UsageError(f"--server-devices must be at least 1, got {self.server_devices}")
        if self.request_timeout <= 0:
            raise UsageError(f"--request-timeout must be positive, got {self.request_timeout:g}")
        mode = getattr(self, "mode", "performance")
        if mode == "accuracy" and not getattr(self, "prompts", ""):
            raise UsageError(
                "an endpoint's accuracy is ROUGE on a prompt file's reference answers: give --prompts FILE (the "
                "served weights are the server's, so there is no FP32 model here to compare tokens with)"
            )
        if self.accuracy_target and mode != "accuracy":
            raise UsageError("--accuracy-target gates --mode accuracy; add --mode accuracy or drop it")
        if self.accuracy_target:
            from accelbench.infer.tokens.quality import target

            target(self.accuracy_target, getattr(self, "model", ""))
