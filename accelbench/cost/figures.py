"""The per-dollar and per-joule figures of a record, derived once from its measured figure.

A rate gives its rate per USD/h, work per USD and USD per million of work (a token run also per million input
tokens), a time its cost; intervals carry over. Each record says how each derived figure was computed in
``details["derived"]``, so a reader of the JSON need not know this module (docs/cost.md)."""

from __future__ import annotations

from accelbench.cost.price import Price
from accelbench.kit import metrics as fig
from accelbench.results.details import typed
from accelbench.results.record import Metric, Result

#: the unit a token run's headline rate is in: its input-token figures derive from it
OUTPUT_TOKENS = "output tokens/s"


def _work(unit: str) -> str:
    """'images/s' -> 'images'; 'queries/s' -> 'queries'; 'output tokens/s' -> 'output tokens'."""
    return unit.removesuffix(" per device").removesuffix("/s") or "samples"


def _say(result: Result, methods: dict[str, str]) -> None:
    """Record how each derived figure was computed beside the figures (``details["derived"]``)."""
    result.details.setdefault("derived", {}).update(methods)


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


def input_rate(result: Result, rate: Metric) -> tuple[Metric, str] | None:
    """A token run's input tokens/s, and how it was counted; None for any other rate.

    The output rate (LoadGen's) times the prompt tokens the run read per output token it wrote, both counted
    by the run itself (``details.input_tokens`` and ``details.output_tokens``): LoadGen measures no input rate.
    """
    if rate.unit != OUTPUT_TOKENS:
        return None
    read, written = typed(result).get("input_tokens"), typed(result).get("output_tokens")
    if not isinstance(read, (int, float)) or not isinstance(written, (int, float)) or read <= 0 or written <= 0:
        return None
    how = f"output tokens/s x {read:,.0f} input / {written:,.0f} output tokens (the run's counts)"
    return fig.scaled(rate, read / written, "input tokens/s"), how


def priced(result: Result, basis: tuple[str, ...], price: Price) -> dict[str, Metric]:
    """The cost figures of ``result`` from the first of ``basis`` it measured (none for a kernel).

    How each was computed goes into the record's ``details["derived"]``.
    """
    usd = f"the price ({price.usd_per_hour:,.4g} USD/h, system.price)"
    for name in basis:
        m = result.metrics.get(name)
        if m is None or not m.value:
            continue
        if m.unit == "s":
            _say(result, {"cost_to_target_usd": f"{name} (s) x {usd} / 3600"})
            return of_time(m, price)
        if not is_rate(m):
            continue
        out = of_rate(m, price)
        said = f"{name} ({m.unit})"
        methods = {
            "per_usd_hour": f"{said} / {usd}",
            "per_usd": f"{said} x 3600 / {usd}",
            "usd_per_million": f"{usd} / 3600 / {said} x 1e6",
        }
        read = input_rate(result, m)
        if read is not None:
            rate, how = read
            out["usd_per_million_input_tokens"] = of_rate(rate, price)["usd_per_million"]
            methods["usd_per_million_input_tokens"] = (
                f"{usd} / 3600 / ({name}: {how}) x 1e6; the whole machine-hour over the input tokens, "
                "not a split of it between prefill and decode"
            )
        _say(result, methods)
        return out
    return {}


def energy(result: Result, basis: tuple[str, ...]) -> dict[str, Metric]:
    """Per-sample (per-query, per output token) energy, work per joule and average watts, where the window's
    energy was measured.

    The average power over the metered window (the family's measured steps or LoadGen run) divided by the
    measured rate; a time (to target) times that power. Nothing when no domain was measured: never a TDP.
    How each was computed goes into the record's ``details["derived"]``.
    """
    reading = result.conditions.get("energy") or {}
    joules, seconds = reading.get("joules"), reading.get("seconds")
    if not joules or not seconds:
        return {}
    watts = joules / seconds
    out = {"average_watts": fig.figure(watts, "W", higher_is_better=False)}
    domains = [k for k, d in (reading.get("domains") or {}).items() if isinstance(d, dict) and "joules" in d]
    methods = {
        "average_watts": f"{joules:,.4g} J over the {seconds:,.4g} s metered window (conditions.energy"
        + (f": {', '.join(domains)}" if domains else "")
        + ")"
    }
    for name in basis:
        m = result.metrics.get(name)
        if m is None or not m.value:
            continue
        said = f"{name} ({m.unit})"
        if m.unit == "s":
            out["energy_to_target_joules"] = fig.scaled(m, watts, "J")
            methods["energy_to_target_joules"] = f"average_watts x {said}"
        elif is_rate(m):
            work = _work(m.unit)
            out["work_per_joule"] = fig.scaled(m, 1 / watts, f"{work}/J")
            methods["work_per_joule"] = f"{said} / average_watts"
            if work == "queries":
                key, per = "millijoules_per_query", fig.inverse(m, watts * 1e3, "mJ/query")
            elif work.endswith("tokens"):  # 'output tokens' -> joules_per_output_token, J per output token
                key = "joules_per_" + work.removesuffix("s").replace(" ", "_")
                per = fig.inverse(m, watts, f"J per {work.removesuffix('s')}")
            else:
                key, per = "joules_per_sample", fig.inverse(m, watts, f"J per {work.removesuffix('s')}")
            out[key] = per
            methods[key] = f"average_watts / {said}" + (" x 1e3" if key.startswith("milli") else "")
        break
    else:
        queries = typed(result).get("queries")  # SingleStream, MultiStream: the run's energy over its queries
        if queries:
            out["millijoules_per_query"] = fig.figure(joules / queries * 1e3, "mJ/query", higher_is_better=False)
            methods["millijoules_per_query"] = f"{joules:,.4g} J / {queries} queries (details.queries) x 1e3"
    _say(result, {k: v for k, v in methods.items() if k in out})
    return out


def derived(result: Result) -> dict[str, str]:
    """How each derived figure of ``result`` was computed (empty for a record made before they said so)."""
    return dict(typed(result).get("derived") or {})
