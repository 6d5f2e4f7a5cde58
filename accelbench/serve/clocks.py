"""Whose clock a serving record's latencies are on: a client that read late gets no verdict, and a server's own
clock, where it keeps one, is set beside the client's.

A client that did not run when the chunks came stamps a whole stream in one burst, so its figures are its own
lateness: such a run's latency verdict is withheld ("not judged: the client was late"), never VALID, while an
INVALID one stays INVALID. The server's mean TTFT over the same requests
(:mod:`accelbench.serve.engines.endpoint.server_clock`) is a second, independent check.
"""

from __future__ import annotations

from typing import Any

from accelbench.results.record import Result
from accelbench.serve.details import serving_details

#: a replay or closed loop whose requests left more than this late at p99 (ms) after they were due was late too
LEFT_LATE_MS = 10.0


def judge_client(result: Result, client: dict[str, Any], mode: str) -> None:
    """Withhold a performance run's VALID where its client was late (the watch's ``late``, or a replay's sends
    late at p99 past :data:`LEFT_LATE_MS`), and say where the server's clock disagrees with the client's."""
    details = serving_details(result)
    why = []
    if client.get("late"):
        why.append(str(client["late"]))
    left = result.metrics.get("issue_late_p99_ms")
    if left is not None and left.value > LEFT_LATE_MS:
        why.append(
            f"the client was late: its requests left {left.value:.3g} ms after they were due at p99 (over the "
            f"{LEFT_LATE_MS:g} ms bound)"
        )
    if why and mode != "accuracy":
        details["not_judged"] = why
        if result.valid:
            result.valid = None
        if not client.get("limited_by"):  # else the watch's words set it aside already
            result.concern("client-limited", f"client-limited: {'; '.join(why)}; the latencies describe the client")
    server = client.get("server_clock")
    if isinstance(server, dict) and server.get("apart"):
        result.concern("server-clock", f"server's clock: {server['apart']}", apart_ms=server.get("ttft_apart_ms"))
