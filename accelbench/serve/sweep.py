"""``--mode sweep``: one Offline run per concurrency (or one Server run per request rate, ``--rates``), and the curve
they draw (MLPerf Endpoints' Pareto curve).

Each point serves the same prompts with at most C requests in flight (a fixed concurrency: ``--batch-size C`` for
that run), so it gives the system's tokens/s per device at the interactivity C allows (tokens/s per user, 1000 /
the median TPOT). Each point is stored as its own record; every record carries the curve so far, the last one the
whole curve and which points are on its Pareto front (no other point has both more tokens/s per device and more
tokens/s per user).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.errors import UsageError
from accelbench.params import opt

if TYPE_CHECKING:
    from accelbench.results.record import Result

#: the default points: 1, 2, 4, ... up to this (7 points, as MLPerf Endpoints asks for at least)
DEFAULT_MAX = 64
MIN_POINTS = 7


class Swept(Protocol):
    """What the sweep reads of a run's parameters (:class:`~accelbench.serve.specs.LLMServeParams`)."""

    # read-only: the parameters are a frozen dataclass
    @property
    def concurrency(self) -> str: ...
    @property
    def rates(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def target_qps(self) -> float: ...


@dataclass(frozen=True)
class SweepParams:
    """The flags of ``--mode sweep`` (a mixin of :class:`~accelbench.serve.specs.LLMServeParams`)."""

    concurrency: str = opt(
        "",
        "--mode sweep: requests in flight at each point, e.g. 1,4,16 (empty: 1,2,4,... up to 64, 7 points)",
        sweep=False,
    )
    rates: str = opt(
        "",
        "--mode sweep --scenario server|interactive: the request rates (queries/s) of the points, e.g. 2,4,8: "
        "one Server run at each, held to the TTFT/TPOT limits",
        sweep=False,
    )


def by_rate(params: Swept) -> bool:
    """Whether the sweep's points are request rates (Server runs), not concurrencies (Offline runs)."""
    return bool(params.rates)


def rates(params: Swept) -> list[float]:
    try:
        values = sorted({float(v) for v in params.rates.split(",") if v.strip()})
    except ValueError:
        raise UsageError(f"--rates takes numbers separated by commas, not {params.rates!r}") from None
    if not values or values[0] <= 0:
        raise UsageError(f"--rates must be positive request rates, got {params.rates!r}")
    return values


def points(params: Swept) -> list[Any]:
    """The concurrencies of ``--concurrency`` (ascending, distinct), or the doubling default; or ``--rates``."""
    if by_rate(params):
        return rates(params)
    if not params.concurrency:
        return [2**i for i in range(DEFAULT_MAX.bit_length()) if 2**i <= DEFAULT_MAX]
    try:
        values = sorted({int(v) for v in params.concurrency.split(",") if v.strip()})
    except ValueError:
        raise UsageError(f"--concurrency takes whole numbers separated by commas, not {params.concurrency!r}") from None
    if not values or values[0] < 1:
        raise UsageError(f"--concurrency points must be at least 1, got {params.concurrency!r}")
    return values


def check(params: Swept) -> None:
    """What a sweep needs: a language model, Offline (each point a fixed concurrency) or Server with ``--rates``,
    valid points; the sweep flags only with ``--mode sweep``."""
    if params.mode != "sweep":
        for flag, value in (("--concurrency", params.concurrency), ("--rates", params.rates)):
            if value:
                raise UsageError(f"{flag} lists the points of --mode sweep; add --mode sweep")
        return
    if params.rates and params.concurrency:
        raise UsageError("a sweep's points are --concurrency (Offline) or --rates (Server), not both")
    if params.rates:
        if params.scenario not in ("server", "interactive"):
            raise UsageError("--rates sweeps Server request rates: give --scenario server (or interactive)")
        if params.target_qps:
            raise UsageError("--rates sets each point's --target-qps: drop --target-qps")
        rates(params)
        return
    if params.scenario != "offline":
        raise UsageError(
            "--mode sweep runs each point in Offline at a fixed concurrency: give --scenario offline "
            "(for the highest request rate within the TTFT/TPOT limits use --mode find-peak --scenario server)"
        )
    points(params)


def _figure(r: "Result", name: str) -> float | None:
    m = r.metrics.get(name)
    return None if m is None else m.value


def curve(results: list["Result"], planned: int, sweep_id: str) -> dict[str, Any]:
    """The points measured so far, and the Pareto front among the ones that can stand (ok and VALID)."""
    rows = []
    rated = bool(results) and bool(results[0].params.get("rates"))
    for r in results:
        rows.append(
            {
                "point": r.params["target_qps"] if rated else r.params["batch_size"],
                "concurrency": None if rated else r.params["batch_size"],
                "rate": r.params["target_qps"] if rated else None,
                "tokens_per_second_per_device": _figure(r, "tokens_per_second_per_device"),
                "tokens_per_second_per_user": _figure(r, "tokens_per_second_per_user"),
                "ttft_p90_ms": _figure(r, "ttft_p90_ms"),
                "tpot_p50_ms": _figure(r, "tpot_p50_ms"),
                "valid": r.valid,
                "set_aside": [c.text for c in r.of_kind("contended", "client-limited")],
            }
        )
    usable = [
        p
        for p in rows
        if p["valid"] and not p["set_aside"] and p["tokens_per_second_per_device"] and p["tokens_per_second_per_user"]
    ]
    front = [
        p["point"]
        for p in usable
        if not any(
            q is not p
            and q["tokens_per_second_per_device"] >= p["tokens_per_second_per_device"]
            and q["tokens_per_second_per_user"] >= p["tokens_per_second_per_user"]
            and (q["tokens_per_second_per_device"], q["tokens_per_second_per_user"])
            != (p["tokens_per_second_per_device"], p["tokens_per_second_per_user"])
            for q in usable
        )
    ]
    each = (
        "one Server LoadGen run per request rate (--target-qps), held to the TTFT/TPOT limits"
        if rated
        else "one Offline LoadGen run per concurrency (requests in flight at most)"
    )
    return {
        "id": sweep_id,
        "axis": "rate" if rated else "concurrency",
        "points": rows,
        "pareto": front,
        "planned_points": planned,
        "method": f"{each}; tokens/s per user = 1000 / median TPOT; the front: no other VALID, uncontended point "
        "has both more tokens/s per device and more tokens/s per user",
    }
