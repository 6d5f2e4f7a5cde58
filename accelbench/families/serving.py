"""When two serving records measure different things although their settings pair: the inference family's own
rules, which the one judge asks through :attr:`accelbench.families.base.Family.unlike`.

A serving rate is a figure of its latency limits, its requests' lengths (the run's own counts, so a default that
changed between versions is caught too), its prompt source and prefix reuse; a Server rate chosen from each run's
own probe measured the probe, not a capacity (:func:`_chosen_load`). Records without these details are never
unlike for want of them (docs/compare.md)."""

from __future__ import annotations

from typing import TypeGuard

from accelbench.results import details
from accelbench.results.record import Result

#: How far two sides' mean request lengths may differ and still be one workload (seeded prompt jitter).
LENGTH_TOLERANCE = 0.05
#: How far apart two sides' offered prefix-cache hit rates may be and still be one workload (points of a fraction).
HIT_RATE_TOLERANCE = 0.05
#: How far two Server runs' self-chosen loads may differ and still measure one thing.
LOAD_TOLERANCE = 0.05


def unlike(b: Result, c: Result) -> list[str]:
    """Why two serving records' figures do not measure the same thing: limits, loads and lengths."""
    out = []
    src_b, src_c = details.source_of(b), details.source_of(c)
    if src_b != src_c:
        out.append(f"unlike prompt sources: {src_b} vs {src_c}")
    hb, hc = details.sent_hit_rate(b), details.sent_hit_rate(c)
    if hb is not None and hc is not None and abs(hb - hc) > HIT_RATE_TOLERANCE:
        out.append(
            f"unlike prefix reuse: {hb:.0%} vs {hc:.0%} of the prompt tokens sent were a prefix sent before (a "
            "server's prefix cache serves them)"
        )
    lb, lc = details.held_to(b), details.held_to(c)
    if lb != lc:
        out.append(f"unlike limits: {_limits_text(lb)} vs {_limits_text(lc)}")
    ob, oc = _chosen_load(b), _chosen_load(c)
    if ob and oc and abs(ob - oc) > LOAD_TOLERANCE * max(ob, oc):
        out.append(
            f"unlike loads: Server at {ob:,.4g} vs {oc:,.4g} queries/s, each chosen from its own probe (a Server "
            "run's throughput is the load it was sent: --mode find-peak measures capacity, --target-qps holds "
            "both to one load)"
        )
    sb, sc = details.mean_lengths(b), details.mean_lengths(c)
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
    return None if p.get("target_qps") else details.target_qps(r)


def _limits_text(pair: tuple[float | None, float | None] | None) -> str:
    if pair is None:
        return "none"
    ttft, tpot = (f"{x:,.4g}" if x is not None else "-" for x in pair)
    return f"p99 TTFT/TPOT {ttft}/{tpot} ms"


def _positive(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and x > 0
