"""The server's own clock beside the client's: its latency histograms (Prometheus ``/metrics``), read before and
after a run, give the server's mean TTFT and time per output token over the requests between the two reads.

Between the client's TTFT and the server's lie the network, the server's HTTP front end and the client's own
lateness; two reads of the histograms' ``_sum`` and ``_count`` measure that gap with nothing on the request path.
The families are each server's own names (vLLM's, SGLang's); a server without them is "not reported", never 0.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

#: each figure's histogram, by server: the first family the server exposes is read
FAMILIES: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "tpot": (
        "vllm:request_time_per_output_token_seconds",
        "vllm:time_per_output_token_seconds",
        "sglang:time_per_output_token_seconds",
    ),
    "itl": ("vllm:inter_token_latency_seconds", "sglang:inter_token_latency_seconds"),
}
#: seconds a read of /metrics may take (it is made outside the measurement)
READ_TIMEOUT = 5.0
#: the client's mean TTFT over the server's beyond both of these is a concern: more than this many ms ...
APART_MS = 10.0
#: ... and more than this share of the server's own mean
APART_SHARE = 0.25


@dataclass(frozen=True)
class Reading:
    """One read of the server's histograms: each figure's family and its (sum, count) over every label set."""

    at: float  # perf_counter
    histograms: dict[str, tuple[str, float, float]]  # figure -> (family, sum, count)


def metrics_url(api_url: str) -> str:
    """``/metrics`` at the server's root: an API base of ``http://host:port/v1`` serves it at ``http://host:port``."""
    parsed = urllib.parse.urlparse(api_url)
    return urllib.parse.urlunparse((parsed.scheme, parsed.netloc, "/metrics", "", "", ""))


def _shown(url: str) -> str:
    """``url`` as a record may say it: no user or password from its netloc."""
    parsed = urllib.parse.urlparse(url)
    host = parsed.hostname or ""
    return f"{parsed.scheme}://{host}{f':{parsed.port}' if parsed.port else ''}{parsed.path}"


def read(api_url: str, headers: dict[str, str] | None = None) -> Reading | str:
    """The server's histograms now, or why there are none (a line: no /metrics, none of the known families)."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return "not reported: prometheus_client is not installed (pip install 'accelbench[endpoint]')"
    url = metrics_url(api_url)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=READ_TIMEOUT) as resp:
            text = resp.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"not reported: the server's {_shown(url)} did not answer ({type(exc).__name__})"
    wanted = {name: figure for figure, names in FAMILIES.items() for name in names}
    found: dict[str, tuple[str, float, float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            figure = wanted.get(family.name)
            if figure is None or figure in found or family.type != "histogram":
                continue
            total = sum(s.value for s in family.samples if s.name == f"{family.name}_sum")
            count = sum(s.value for s in family.samples if s.name == f"{family.name}_count")
            found[figure] = (family.name, total, count)
    except ValueError:
        return f"not reported: {_shown(url)} is not Prometheus' text format"
    if "ttft" not in found:
        return f"not reported: {_shown(url)} has no TTFT histogram of a known server ({', '.join(FAMILIES['ttft'])})"
    return Reading(time.perf_counter(), found)


def between(before: Reading | str, after: Reading | str) -> dict[str, Any]:
    """The server's means over the requests between two reads (ms), and how many requests it counted."""
    if isinstance(before, str) or isinstance(after, str):
        return {"not_reported": before if isinstance(before, str) else str(after)}
    out: dict[str, Any] = {}
    for figure, (family, total, count) in after.histograms.items():
        if figure not in before.histograms:
            continue
        _, total0, count0 = before.histograms[figure]
        n = count - count0
        if n > 0:
            out[f"{figure}_mean_ms"] = 1e3 * (total - total0) / n
            out[f"{figure}_family"] = family
        if figure == "ttft":
            out["requests"] = int(n)
    return out


def compare(server: dict[str, Any], client_ttft_ms: list[float], client_tpot_ms: list[float]) -> dict[str, Any]:
    """The server's means beside the client's over the same requests, and ``apart``: why they disagree, if they
    do (the client's mean TTFT over the server's by more than :data:`APART_MS` and :data:`APART_SHARE`)."""
    out = dict(server)
    out["client_requests"] = len(client_ttft_ms)
    out["method"] = (
        "the server's histograms (sum and count) read before and after the run, their difference over the requests "
        "between; the client's means over the requests it sent meanwhile, from its send to its first chunk (TTFT) "
        "and from its first chunk to its last over the tokens after the first (TPOT)"
    )
    if "not_reported" in server or "ttft_mean_ms" not in server:
        return out
    if client_ttft_ms:
        out["client_ttft_mean_ms"] = sum(client_ttft_ms) / len(client_ttft_ms)
    if client_tpot_ms:
        out["client_tpot_mean_ms"] = sum(client_tpot_ms) / len(client_tpot_ms)
    if server.get("requests") != len(client_ttft_ms):
        out["not_compared"] = (
            f"the server counted {server.get('requests')} requests between the reads, the client sent "
            f"{len(client_ttft_ms)}: another client shared the server (or some of its answers streamed no text)"
        )
        return out
    if "client_ttft_mean_ms" in out:
        gap = out["client_ttft_mean_ms"] - server["ttft_mean_ms"]
        out["ttft_apart_ms"] = gap
        if gap > APART_MS and gap > APART_SHARE * server["ttft_mean_ms"]:
            out["apart"] = (
                f"the client's mean TTFT {out['client_ttft_mean_ms']:.3g} ms is {gap:.3g} ms over the server's own "
                f"({server['ttft_mean_ms']:.3g} ms, {server['ttft_family']}) over the same {len(client_ttft_ms)} "
                f"requests (over {APART_MS:g} ms and {APART_SHARE:.0%}): the time is spent between the socket and "
                "the server's engine (the network, its HTTP front end) or by a client that read late"
            )
    return out
