"""When two serving records measure different things although their settings pair: the inference family's own
rules, which the one judge asks through :attr:`accelbench.families.base.Family.unlike`.

A serving rate is a figure of the latency limits it was held to (``details.limits``: p99 TTFT and TPOT) and of
the requests' lengths (``details.input_tokens`` and ``output_tokens`` over ``details.requests``, the run's own
counts, so a default that changed between versions is caught too). A Server run's throughput is the rate it was
sent: two runs that each chose theirs from a probe measured their probes, not a capacity (:func:`_chosen_load`).
Records without these details are never unlike for want of them.
"""

from __future__ import annotations

from typing import TypeGuard

from accelbench.results.record import Result

#: How far two sides' mean request lengths may differ and still be one workload (seeded prompt jitter).
LENGTH_TOLERANCE = 0.05
#: How far two Server runs' self-chosen loads may differ and still measure one thing.
LOAD_TOLERANCE = 0.05


def unlike(b: Result, c: Result) -> list[str]:
    """Why two serving records' figures do not measure the same thing: limits, loads and lengths."""
    out = []
    lb, lc = _limits(b), _limits(c)
    if lb != lc:
        out.append(f"unlike limits: {_limits_text(lb)} vs {_limits_text(lc)}")
    ob, oc = _chosen_load(b), _chosen_load(c)
    if ob and oc and abs(ob - oc) > LOAD_TOLERANCE * max(ob, oc):
        out.append(
            f"unlike loads: Server at {ob:,.4g} vs {oc:,.4g} queries/s, each chosen from its own probe (a Server "
            "run's throughput is the load it was sent: --mode find-peak measures capacity, --target-qps holds "
            "both to one load)"
        )
    sb, sc = _lengths(b), _lengths(c)
    if sb and sc and any(abs(x - y) > LENGTH_TOLERANCE * max(x, y) for x, y in zip(sb, sc, strict=True)):
        out.append(
            f"unlike lengths: {sb[0]:,.0f}/{sb[1]:,.0f} vs {sc[0]:,.0f}/{sc[1]:,.0f} tokens per request "
            "(mean input/output)"
        )
    return out


def _chosen_load(r: Result) -> float | None:
    """The query rate a Server (or interactive) performance run was sent where the run chose it (from its
    calibration probe, not ``--target-qps``); None otherwise (Offline, find-peak, a rate the user set)."""
    p = r.params
    if p.get("scenario") not in ("server", "interactive") or p.get("mode", "performance") != "performance":
        return None
    rate = r.details.get("target_qps")
    return float(rate) if not p.get("target_qps") and isinstance(rate, (int, float)) and rate > 0 else None


def _limits(r: Result) -> tuple[float | None, float | None] | None:
    """(p99 TTFT ms, p99 TPOT ms) a record was held to; None where it records none (an Offline run, no tokens)."""
    lim = r.details.get("limits")
    if not isinstance(lim, dict):
        return None
    pair = (lim.get("ttft_p99_ms"), lim.get("tpot_p99_ms"))
    return None if pair == (None, None) else pair


def _limits_text(pair: tuple[float | None, float | None] | None) -> str:
    if pair is None:
        return "none"
    ttft, tpot = (f"{x:,.4g}" if x is not None else "-" for x in pair)
    return f"p99 TTFT/TPOT {ttft}/{tpot} ms"


def _lengths(r: Result) -> tuple[float, float] | None:
    """Mean input and output tokens per request, from the run's counts; None where it has none."""
    d = r.details
    n, read, written = d.get("requests"), d.get("input_tokens"), d.get("output_tokens")
    if not (_positive(n) and _positive(read) and _positive(written)):
        return None
    return read / n, written / n


def _positive(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and x > 0
