"""The token runs' charts, drawn from plain numbers like every chart of :mod:`accelbench.report.charts`: a sweep's
curve (throughput against interactivity, and the time to first token at each point), and each run's recorded TTFT
and TPOT percentiles against the limits it was held to.

A record keeps the percentiles LoadGen (or the SUT's clock) reported, not the latencies they came from, so the
latency chart draws those percentiles as marks on a line per run: never a histogram, which would claim a
distribution no record holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from accelbench.report.charts import BAD, NEUTRAL, PALETTE, legend_below, plain_log, tradeoff_axes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: how each recorded percentile is marked: its name, marker and colour (the p99, the one held to a limit, darkest)
PERCENTILES = (("p50", "o", PALETTE[4]), ("p90", "s", PALETTE[0]), ("p99", "D", PALETTE[7]))


@dataclass(frozen=True)
class Spread:
    """One run's recorded percentiles of one latency in ms (None where the record has none), and the p99 limit the
    run was held to (None: no limit, so no mark)."""

    p50: float | None
    p90: float | None
    p99: float | None
    limit: float | None = None


def point(p: dict[str, Any]) -> Any:
    """A sweep point's x: its concurrency, or its request rate in a rate sweep (``point``; a record made before
    rate sweeps has only ``concurrency``). The Pareto front lists points by this value."""
    return p["point"] if p.get("point") is not None else p.get("concurrency")


def draw_pareto(
    fig: "Figure", series: Sequence[tuple[str, Sequence[dict], Sequence[Any]]], axis: str = "concurrency"
) -> None:
    """Sweeps: left, tokens/s per device (y) against tokens/s per user (x), every point, the Pareto front's
    joined (a point off the front or set aside is hollow); right, TTFT p90 against the sweep's ``axis`` (requests
    in flight, log 2; or the request rate of a rate sweep, log), one line per sweep, in the colour of its curve;
    the legend under both panels."""
    left, right = fig.subplots(1, 2)
    for i, (label, points, front) in enumerate(series):
        color = PALETTE[i % 8]
        usable = [p for p in points if p.get("tokens_per_second_per_user") and p.get("tokens_per_second_per_device")]
        for p in usable:
            solid = point(p) in front
            left.scatter(
                p["tokens_per_second_per_user"],
                p["tokens_per_second_per_device"],
                s=30,
                zorder=3,
                color=color if solid else "none",
                edgecolors=color,
            )
        on = sorted((p for p in usable if point(p) in front), key=lambda p: p["tokens_per_second_per_user"])
        left.plot(
            [p["tokens_per_second_per_user"] for p in on],
            [p["tokens_per_second_per_device"] for p in on],
            color=color,
            label=label,
        )
        timed = [p for p in points if p.get("ttft_p90_ms") is not None and point(p)]
        right.plot([point(p) for p in timed], [p["ttft_p90_ms"] for p in timed], marker="o", color=color)
    tradeoff_axes(left)
    right.set_xscale("log", base=10 if axis == "rate" else 2)
    plain_log(right, ("x", ""))  # 1, 2, 4, 8: not 2^0, 2^1
    right.set_xlabel("request rate (queries/s, log scale)" if axis == "rate" else "requests in flight (concurrency)")
    right.set_ylabel("TTFT p90 (ms)")
    right.set_ylim(bottom=0)
    legend_below(fig, left)


def draw_latency(fig: "Figure", labels: Sequence[str], panels: Sequence[tuple[str, Sequence[Spread]]]) -> None:
    """One panel per latency (TTFT, TPOT: each in its own panel, never on one axis), one row per run: its p50,
    p90 and p99 marked on a line from the least to the greatest, and its own p99 limit a red bar across its row
    with the figure beside it, so runs held to different limits are each judged against theirs. The axis is log:
    a saturated run's p99 is 10-100x its limit, and the runs near their limit are the ones to read."""
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False).ravel()
    rows = list(range(len(labels)))
    for ax, (title, spreads) in zip(axes, panels, strict=True):
        for i, s in zip(rows, spreads, strict=True):
            known = [v for v in (s.p50, s.p90, s.p99) if v is not None and v > 0]
            if len(known) > 1:
                ax.plot([min(known), max(known)], [i, i], color=NEUTRAL, linewidth=1, zorder=1)
            for (name, marker, color), v in zip(PERCENTILES, (s.p50, s.p90, s.p99), strict=True):
                if v is not None and v > 0:
                    ax.scatter([v], [i], marker=marker, s=26, color=color, zorder=3, label=name)
            if s.limit is not None and s.limit > 0:
                ax.plot([s.limit] * 2, [i - 0.4, i + 0.4], color=BAD, linewidth=2, zorder=2, label="p99 limit")
                ax.annotate(
                    f"{s.limit:,.4g}",
                    (s.limit, i - 0.45),
                    xytext=(2, 0),
                    textcoords="offset points",
                    va="top",
                    fontsize=6.5,
                    color=BAD,
                )
        if ax.has_data():
            ax.set_xscale("log")
            plain_log(ax, ("x", ""))
        ax.set_title(title, loc="left")
        ax.set_xlabel("ms, log scale")
        ax.grid(axis="y", visible=False)
    axes[0].set_yticks(rows, labels)
    axes[0].set_ylim(len(labels) - 0.5, -0.6)  # the first run on top, room above it for its limit's figure
    shown: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            shown.setdefault(label, handle)
    if shown:  # under the axes: wherever a legend sits inside, some run's marks lie beneath it
        fig.legend(list(shown.values()), list(shown), fontsize=7, loc="outside lower center", ncols=len(shown))
