"""``--concurrency N``: a closed loop of N users, each sending its next request when its last was answered (the load
of vLLM's ``bench serve --max-concurrency``); and ``--mode sweep``: one loop per concurrency (or one Server run per
``--rates``), each point its own record carrying the curve so far and its Pareto front (tokens/s per device against
tokens/s per user), as MLPerf Endpoints draws it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.errors import UsageError
from accelbench.params import opt

if TYPE_CHECKING:
    from accelbench.results.details import Sweep, SweepPoint
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
    @property
    def expected_qps(self) -> float: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def user_think_ms(self) -> float: ...
    @property
    def num_requests(self) -> int: ...


#: the scenario of a closed loop (``--concurrency N``): its records name it, and label it ``concurrency N``
CLOSED_LOOP = "concurrency"


def closed_loop(values: dict[str, Any]) -> dict[str, Any]:
    """The settings as given (by flag name), with what ``--concurrency`` implies said: a closed loop's scenario (in
    place of the default, Offline) and, outside a sweep, the engine's batch at the concurrency where none was given.
    A sweep with no ``--rates`` is a sweep of closed loops too."""
    concurrency = str(values.get("concurrency") or "")
    sweeping = values.get("mode") == "sweep"
    if not (concurrency or (sweeping and not values.get("rates"))):
        return values
    out = dict(values)
    asked = out.get("scenario")
    if concurrency and not sweeping and asked not in (None, CLOSED_LOOP):
        raise UsageError(
            f"--concurrency {concurrency} is a closed loop of users, not LoadGen's {asked} scenario: drop "
            f"--scenario {asked}, or drop --concurrency for a LoadGen {asked} run"
        )
    if asked in (None, "offline"):
        out["scenario"] = CLOSED_LOOP
    if not sweeping and "batch_size" not in out and concurrency.strip().isdigit() and int(concurrency) >= 1:
        out["batch_size"] = int(concurrency)
    return out


def users(params: Swept) -> int | None:
    """The users of a closed loop outside a sweep (``--concurrency N``), else None."""
    if params.mode == "sweep" or params.scenario != CLOSED_LOOP:
        return None
    return int(params.concurrency)


@dataclass(frozen=True)
class SweepParams:
    """The flags of ``--mode sweep`` (a mixin of :class:`~accelbench.serve.specs.LLMServeParams`)."""

    concurrency: str = opt(
        "",
        "a closed loop of N users, each sending its next request when its last one was answered (TTFT from each "
        "send; vLLM's --max-concurrency, AIPerf's --concurrency); --mode sweep: the points, e.g. 1,4,16 (empty: "
        "1,2,4,... up to 64, 7 points)",
        sweep=False,
        metavar="N",
    )
    user_think_ms: float = opt(
        0.0,
        "--concurrency: a user's think time, ms from an answer to its next request (0: at once, as vLLM and AIPerf "
        "send)",
        sweep=False,
    )
    rates: str = opt(
        "",
        "--mode sweep --scenario server|interactive: the request rates (queries/s) of the points, e.g. 2,4,8: "
        "one Server run at each, held to the TTFT/TPOT limits",
        sweep=False,
    )
    num_requests: int = opt(
        0,
        "--concurrency (and each point of a --mode sweep): N requests past the warm-up, then stop (the warm-up, "
        "each user's first request, is sent besides: N + users in all; vLLM's --num-prompts N), with no minimum "
        "duration; at least 3 x the users (0: as long as a Server run of the profile)",
        sweep=False,
        metavar="N",
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
    """What a closed loop and a sweep need: one whole number of users outside a sweep, nothing that contradicts a
    closed loop (another scenario, a request rate); a sweep's valid points, a closed loop's at each or Server at
    ``--rates``; ``--rates`` only with ``--mode sweep``."""
    if params.user_think_ms < 0:
        raise UsageError(f"--user-think-ms must not be negative, got {params.user_think_ms:g}")
    if params.user_think_ms and params.scenario != CLOSED_LOOP:
        raise UsageError("--user-think-ms is a closed loop's think time: add --concurrency N")
    if params.num_requests < 0:
        raise UsageError(f"--num-requests must not be negative, got {params.num_requests}")
    if params.num_requests and params.scenario != CLOSED_LOOP:
        raise UsageError(
            "--num-requests sizes a closed loop (--concurrency N, or a --mode sweep of concurrencies); LoadGen sizes "
            "its own runs (--duration, --profile): drop --num-requests"
        )
    if params.mode != "sweep":
        if params.rates:
            raise UsageError("--rates lists the points of --mode sweep; add --mode sweep")
        if params.scenario == CLOSED_LOOP or params.concurrency:
            _check_closed(params)
        return
    if params.rates and params.concurrency:
        raise UsageError("a sweep's points are --concurrency (closed loops) or --rates (Server), not both")
    if params.rates:
        if params.scenario not in ("server", "interactive"):
            raise UsageError("--rates sweeps Server request rates: give --scenario server (or interactive)")
        if params.target_qps:
            raise UsageError("--rates sets each point's --target-qps: drop --target-qps")
        rates(params)
        return
    if params.scenario != CLOSED_LOOP:
        raise UsageError(
            f"--mode sweep runs each point as a closed loop of --concurrency users: drop --scenario {params.scenario} "
            "(for the highest request rate within the TTFT/TPOT limits use --mode find-peak --scenario server; for "
            "Server runs at request rates, --rates)"
        )
    _no_rate(params)
    _enough_requests(params, max(points(params)), " (the sweep's largest point)")


def _check_closed(params: Swept) -> None:
    """A closed loop's flags: ``--concurrency N`` (one whole number), in performance mode, no request rate."""
    if not params.concurrency:
        raise UsageError("--scenario concurrency is a closed loop of N users: give --concurrency N")
    if params.scenario != CLOSED_LOOP:
        raise UsageError(
            f"--concurrency N is a closed loop of N users, its own load: drop --scenario {params.scenario} (Server "
            "sends at a request rate, --target-qps)"
        )
    try:
        n = int(params.concurrency)
    except ValueError:
        words = "a list of points needs --mode sweep: add --mode sweep" if "," in params.concurrency else (
            f"not {params.concurrency!r}"
        )  # fmt: skip
        raise UsageError(f"--concurrency takes one whole number of users outside --mode sweep; {words}") from None
    if n < 1:
        raise UsageError(f"--concurrency must be at least 1 user, got {n}")
    if params.mode != "performance":
        raise UsageError(f"--concurrency N is a closed loop measured in performance mode, not --mode {params.mode}")
    _no_rate(params)
    _enough_requests(params, n)
    if params.batch_size < n:
        raise UsageError(
            f"--batch-size {params.batch_size} is under --concurrency {n}: the engine would hold back users' "
            "requests; drop --batch-size (the closed loop's is its concurrency) or raise it"
        )


#: rounds of its users a closed loop sends past the warm-up at least: a steady window needs every user to send past
#: its warm-up and a last full round after it (:func:`accelbench.serve.figures.steady`)
MIN_ROUNDS = 3


def closed_requests(users: int, least: int) -> int:
    """A closed loop's requests past its users' warm-up: ``least`` (a Server run's of the profile) and at least
    :data:`MIN_ROUNDS` rounds, then one round more for the cool-down its steady window leaves out."""
    return max(least, MIN_ROUNDS * users) + users


def _enough_requests(params: Swept, users: int, which: str = "") -> None:
    """``--num-requests N`` holds a steady window at ``users`` users (a sweep's most): :data:`MIN_ROUNDS` rounds."""
    least = MIN_ROUNDS * users
    if params.num_requests and params.num_requests < least:
        raise UsageError(
            f"--num-requests {params.num_requests} is under {least}, {MIN_ROUNDS} rounds of {users} users{which} past "
            "their warm-up: a steady window needs them; raise it (or drop it: as long as a Server run of the profile)"
        )


def _no_rate(params: Swept) -> None:
    """A closed loop sends at the pace of its users' answers: a request rate given beside it is refused."""
    for flag, value in (("--target-qps", params.target_qps), ("--expected-qps", params.expected_qps)):
        if value:
            raise UsageError(f"{flag} is LoadGen's request rate; a closed loop's rate is its users': drop {flag}")


def _figure(r: "Result", name: str) -> float | None:
    m = r.metrics.get(name)
    return None if m is None else m.value


def _users(r: "Result") -> int:
    """A concurrency point's users: its ``concurrency`` (a closed loop's), else its ``batch_size`` (an Offline
    point's, in a sweep made before the closed loop)."""
    given = str(r.params.get("concurrency") or "")
    return int(given) if given.isdigit() else int(r.params["batch_size"])


def curve(results: list["Result"], planned: int, sweep_id: str) -> Sweep:
    """The points measured so far, and the Pareto front among the ones that can stand (ok and VALID)."""
    rows: list[SweepPoint] = []
    rated = bool(results) and bool(results[0].params.get("rates"))
    for r in results:
        point: float = r.params["target_qps"] if rated else _users(r)
        rows.append(
            {
                "point": point,
                "concurrency": None if rated else _users(r),
                "rate": point if rated else None,
                "tokens_per_second_per_device": _figure(r, "tokens_per_second_per_device"),
                "tokens_per_second_per_user": _figure(r, "tokens_per_second_per_user"),
                "ttft_p90_ms": _figure(r, "ttft_p90_ms"),
                "tpot_p50_ms": _figure(r, "tpot_p50_ms"),
                "requests_per_second": _figure(r, "requests_per_second"),
                "valid": r.valid,
                "set_aside": [c.text for c in r.of_kind("contended", "client-limited")],
            }
        )
    # (point, tokens/s per device, tokens/s per user) of each point that can stand
    usable = [
        (p["point"], device, user)
        for p in rows
        if p["valid"] and not p["set_aside"]
        and (device := p["tokens_per_second_per_device"]) and (user := p["tokens_per_second_per_user"])
    ]  # fmt: skip
    front = [
        point
        for point, device, user in usable
        if not any(d >= device and u >= user and (d, u) != (device, user) for _, d, u in usable)
    ]
    each = (
        "one Server LoadGen run per request rate (--target-qps), held to the TTFT/TPOT limits"
        if rated
        else "one closed loop per concurrency (N users, each sending its next request when its last one was "
        "answered; its steady state, TTFT from each send)"
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
