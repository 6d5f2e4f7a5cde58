"""The per-dollar figures of a record, derived once from its measured figure and the machine's price.

A rate (``throughput`` in images/s, a Server run's queries/s) gives three: the rate per USD/h (the TPUv2 vs
V100 study's "images/s per $/h"), the work per USD, and the USD per million of work; a time (time to target)
gives its cost. Intervals carry over: a rate's interval scales, a cost per unit of work inverts it.
"""

from __future__ import annotations

from accelbench.cost.price import Price
from accelbench.kit import metrics as fig
from accelbench.results.record import Metric, Result


def _work(unit: str) -> str:
    """'images/s' -> 'images'; 'queries/s' -> 'queries'."""
    return unit.removesuffix("/s").removesuffix(" per device") or "samples"


def is_rate(m: Metric) -> bool:
    return m.higher_is_better and m.unit.endswith("/s") and "B/s" not in m.unit


def of_rate(rate: Metric, price: Price) -> dict[str, Metric]:
    usd_h = price.usd_per_hour
    work = _work(rate.unit)
    per_usd_hour = fig.scaled(rate, 1 / usd_h, f"{rate.unit} per USD/h")
    per_usd = fig.scaled(rate, 3600 / usd_h, f"{work} per USD")
    return {
        "per_usd_hour": per_usd_hour,
        "per_usd": per_usd,
        "usd_per_million": fig.inverse(per_usd, 1e6, f"USD per 1M {work}"),
    }


def of_time(seconds: Metric, price: Price) -> dict[str, Metric]:
    return {"cost_to_target_usd": fig.scaled(seconds, price.usd_per_hour / 3600, "USD")}


def priced(result: Result, basis: tuple[str, ...], price: Price) -> dict[str, Metric]:
    """The cost figures of ``result`` from the first of ``basis`` it measured (none for a kernel)."""
    for name in basis:
        m = result.metrics.get(name)
        if m is None or not m.value:
            continue
        if m.unit == "s":
            return of_time(m, price)
        if is_rate(m):
            return of_rate(m, price)
    return {}


def energy(result: Result, basis: tuple[str, ...]) -> dict[str, Metric]:
    """Per-sample (or per-query) energy, work per joule and average watts, where the window's energy was measured.

    The average power over the metered window (the family's measured steps or LoadGen run) divided by the
    measured rate; a time (to target) times that power. Nothing when no domain was measured: never a TDP.
    """
    reading = result.conditions.get("energy") or {}
    joules, seconds = reading.get("joules"), reading.get("seconds")
    if not joules or not seconds:
        return {}
    watts = joules / seconds
    out = {"average_watts": fig.figure(watts, "W", higher_is_better=False)}
    for name in basis:
        m = result.metrics.get(name)
        if m is None or not m.value:
            continue
        if m.unit == "s":
            out["energy_to_target_joules"] = fig.scaled(m, watts, "J")
        elif is_rate(m):
            work = _work(m.unit)
            out["work_per_joule"] = fig.scaled(m, 1 / watts, f"{work}/J")
            if work == "queries":
                out["millijoules_per_query"] = fig.inverse(m, watts * 1e3, "mJ/query")
            else:
                out["joules_per_sample"] = fig.inverse(m, watts, f"J per {work.removesuffix('s')}")
        return out
    queries = result.details.get("queries")  # SingleStream, MultiStream: the run's energy over its queries
    if queries:
        out["millijoules_per_query"] = fig.figure(joules / queries * 1e3, "mJ/query", higher_is_better=False)
    return out
