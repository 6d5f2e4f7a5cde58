"""``accelbench results requests``: a serving run's request file as a table's rows, and one line of the figures
computed again from them (:func:`accelbench.serve.figures.measure`, as the record's were)."""

from __future__ import annotations

from typing import Any

from accelbench.serve import figures
from accelbench.serve.requests import RequestLog


def summary_line(log: RequestLog, ttft_ms: float | None = None, tpot_ms: float | None = None) -> str:
    """One line of the figures from the rows: requests, throughput, TTFT/TPOT/ITL p50 and p99."""
    m = figures.measure(log.rows, figures.load_of(log), ttft_ms, tpot_ms)
    f = m.values
    rows, failed = len(log.rows), sum(r.status != "ok" for r in log.rows)
    words = [f"{rows} requests" + (f" ({failed} failed)" if failed else "")]
    if "requests_per_second" in f:
        words.append(f"{f['requests_per_second']:,.4g} requests/s, {f['tokens_per_second']:,.4g} output tokens/s")
    for name, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("latency", "latency")):
        if f"{name}_p50_ms" in f:
            words.append(f"{label} p50 {f[f'{name}_p50_ms']:.4g} ms, p99 {f[f'{name}_p99_ms']:.4g} ms")
    if "goodput_requests_per_second" in f:
        words.append(f"goodput {f['goodput_requests_per_second']:,.4g} requests/s")
    clock = " (the SUT's clock; the record's TTFT, TPOT and throughput are LoadGen's)" if log.loadgen else ""
    if m.window is not None:  # a closed loop's figures are its steady window's, as the record's
        clock = (
            f" (the steady window {m.window.start:.3f}-{m.window.end:.3f} s: {len(m.inside)} requests answered "
            "inside it; each user's first request and those answered after every user's last full round left out)"
        )
    return "; ".join(words) + clock


def table_rows(log: RequestLog) -> list[dict[str, Any]]:
    """Each request flat, with its TTFT and TPOT in ms, for a table or CSV (its gaps space-separated, seconds)."""
    out = []
    for r in log.rows:
        ttft, tpot = r.ttft, r.tpot
        out.append({
            "id": r.id, "sample": r.sample, "user": r.user, "session": r.session, "turn": r.turn,
            "scheduled_s": r.scheduled, "sent_s": r.sent, "first_s": r.first, "first_answer_s": r.first_answer,
            "done_s": r.done, "ttft_ms": ttft * 1e3 if ttft is not None else None,
            "tpot_ms": tpot * 1e3 if tpot is not None else None, "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens, "chunks": len(r.gaps) + (r.first is not None), "status": r.status,
            "error": r.error, "gaps_s": " ".join(repr(g) for g in r.gaps),
        })  # fmt: skip
    return out
