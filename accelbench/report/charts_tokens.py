"""The token runs' charts, drawn from plain numbers like every chart of :mod:`accelbench.report.charts`: a sweep's
curve (throughput against interactivity, and the time to first token at each point), each run's recorded TTFT
and TPOT percentiles against the limits it was held to, and a conversation run's TTFT turn by turn.

A record keeps the percentiles LoadGen (or the SUT's clock) reported, not the latencies they came from, so the
latency chart draws those percentiles as marks on a line per run: never a histogram, which would claim a
distribution no record holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from accelbench.report.charts import (
    BAD,
    NEUTRAL,
    PALETTE,
    clean_limits,
    draw_mark,
    legend_below,
    mark_legend,
    plain_log,
    tradeoff_axes,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from accelbench.results.details import SweepPoint

#: how each recorded percentile is marked: its name, marker and colour (the p99, the one held to a limit, darkest)
PERCENTILES = (("p50", "o", PALETTE[4]), ("p90", "s", PALETTE[0]), ("p99", "D", PALETTE[7]))


@dataclass(frozen=True)
class Spread:
    """One run's recorded percentiles of one latency in ms (None where the record has none), the p99 limit the
    run was held to (None: no limit, so no mark), and what the run is worth: '' VALID and uncontended, else
    'INVALID', 'contended' or both ('INVALID, contended'): such a run is drawn hollow and sets no scale."""

    p50: float | None
    p90: float | None
    p99: float | None
    limit: float | None = None
    mark: str = ""


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation run as its record keeps it: the turn number (from 1), the requests answered at
    that turn, their mean prompt tokens (the history so far plus the new message) and their median and p99 TTFT
    in ms (each None where the record has none)."""

    turn: int
    requests: int
    prompt_tokens: float | None
    p50: float | None
    p99: float | None


#: at most this many turns get their median's figure written beside its point: more would crowd the line
TURN_LABELS = 12


def point(p: SweepPoint) -> Any:
    """A sweep point's x: its concurrency, or its request rate in a rate sweep (``point``; a record made before
    rate sweeps has only ``concurrency``). The Pareto front lists points by this value."""
    return p["point"] if p.get("point") is not None else p.get("concurrency")


def point_mark(p: SweepPoint) -> str:
    """A sweep point's mark (:func:`accelbench.report.charts.mark_style`): 'INVALID', else the first reason it was
    set aside ('contended', 'client-limited'), else '' (a record made before points carried these: '')."""
    if p.get("valid") is False:
        return "INVALID"
    return str(p["set_aside"][0]).split(":")[0] if p.get("set_aside") else ""


def _user(p: SweepPoint) -> float:
    """A drawn point's tokens/s per user (x): a point is drawn only where it has it."""
    return float(p.get("tokens_per_second_per_user") or 0.0)


def _device(p: SweepPoint) -> float:
    """A drawn point's tokens/s per device (y): a point is drawn only where it has it."""
    return float(p.get("tokens_per_second_per_device") or 0.0)


def _ttft(p: SweepPoint) -> float:
    """A drawn point's TTFT p90 (ms): the right panel draws only the points with one."""
    return float(p.get("ttft_p90_ms") or 0.0)


def draw_pareto(
    fig: "Figure", series: Sequence[tuple[str, Sequence[SweepPoint], Sequence[Any]]], axis: str = "concurrency"
) -> None:
    """Sweeps: left, tokens/s per device (y) against tokens/s per user (x), every point, the Pareto front's
    joined (a clean point off the front pale; an INVALID or set-aside one marked as such, :func:`point_mark`);
    right (where some point timed a first token), TTFT p90 against the sweep's ``axis`` (requests in flight, log 2;
    or the request rate of a rate sweep, log), a line per sweep through its clean points, in the colour of its
    curve, the others marked; the axes span the clean points (one far off is drawn at the edge); the legend under
    the panels."""
    usable = [
        [p for p in points if p.get("tokens_per_second_per_user") and p.get("tokens_per_second_per_device")]
        for _, points, _ in series
    ]
    clean = [p for ps in usable for p in ps if not point_mark(p)]
    xspan = clean_limits((_user(p) for p in clean), zero=True)
    yspan = clean_limits((_device(p) for p in clean), zero=True)
    timed = [[p for p in points if p.get("ttft_p90_ms") is not None and point(p)] for _, points, _ in series]
    tspan = clean_limits((_ttft(p) for ps in timed for p in ps if not point_mark(p)), zero=True)
    # no point timed a first token (an Offline sweep by LoadGen's clock): no empty panel claiming an axis
    left, right = fig.subplots(1, 2) if any(timed) else (fig.add_subplot(), None)
    off, pale = False, False
    for i, ((label, _, front), mine, times) in enumerate(zip(series, usable, timed, strict=True)):
        color = PALETTE[i % 8]
        for p in mine:
            x, y, mark = _user(p), _device(p), point_mark(p)
            if not mark and point(p) not in front:  # clean, but another point beats it on both: pale
                left.scatter(x, y, s=30, zorder=3, color=color, alpha=0.35)
                pale = True
            else:
                off |= draw_mark(left, x, y, mark, color, xspan, yspan)
        on = sorted((p for p in mine if point(p) in front and not point_mark(p)), key=_user)
        left.plot(
            [_user(p) for p in on],
            [_device(p) for p in on],
            color=color,
            label=label,
        )
        if right is None:
            continue
        kept = [p for p in times if not point_mark(p)]  # the line joins the clean points; the others are marks
        right.plot([point(p) for p in kept], [_ttft(p) for p in kept], marker="o", color=color)
        for p in times:
            if point_mark(p):
                off |= draw_mark(right, point(p), _ttft(p), point_mark(p), color, None, tspan)
    if pale:
        left.scatter([], [], s=30, color=NEUTRAL, alpha=0.35, label="VALID, off the front (pale)")
    mark_legend(left, (point_mark(p) for ps in usable + timed for p in ps), off)
    tradeoff_axes(left, xspan, yspan)
    if right is None:
        legend_below(fig, left)
        return
    right.set_xscale("log", base=10 if axis == "rate" else 2)
    plain_log(right, ("x", ""))  # 1, 2, 4, 8: not 2^0, 2^1
    right.set_xlabel("request rate (queries/s, log scale)" if axis == "rate" else "requests in flight (concurrency)")
    right.set_ylabel("TTFT p90 (ms)")
    right.set_ylim(*(tspan or (0, None)))
    legend_below(fig, left)


def draw_latency(fig: "Figure", labels: Sequence[str], panels: Sequence[tuple[str, Sequence[Spread]]]) -> None:
    """One panel per latency (TTFT, TPOT: each in its own panel, never on one axis), one row per run: its p50,
    p90 and p99 marked on a line from the least to the greatest, and its own p99 limit a red bar across its row
    with the figure beside it, so runs held to different limits are each judged against theirs. The axis is log:
    a saturated run's p99 is 10-100x its limit, and the runs near their limit are the ones to read."""
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False).ravel()
    rows = list(range(len(labels)))
    aside, off = False, False
    for ax, (title, spreads) in zip(axes, panels, strict=True):
        span = clean_limits(
            (v for s in spreads if not s.mark for v in (s.p50, s.p90, s.p99, s.limit) if v is not None), log=True
        )
        for i, s in zip(rows, spreads, strict=True):
            known = [v for v in (s.p50, s.p90, s.p99) if v is not None and v > 0]
            if len(known) > 1:
                ends = [min(max(v, span[0]), span[1]) if span else v for v in (min(known), max(known))]
                ax.plot(ends, [i, i], color=NEUTRAL, linewidth=1, zorder=1)
            for (name, marker, color), v in zip(PERCENTILES, (s.p50, s.p90, s.p99), strict=True):
                if v is None or v <= 0:
                    continue
                if span and not span[0] <= v <= span[1]:  # beyond the clean runs' span: at the edge, pointing out
                    draw_mark(ax, v, i, "aside", color, span, None)
                    off = True
                elif s.mark:  # INVALID or contended: hollow, its row's label says which
                    ax.scatter([v], [i], marker=marker, s=26, facecolors="none", edgecolors=color, zorder=3)
                else:
                    ax.scatter([v], [i], marker=marker, s=26, color=color, zorder=3, label=name)
            aside |= bool(s.mark)
            if s.limit is not None and s.limit > 0:
                _limit(ax, s.limit, i, span)
        if ax.has_data():
            ax.set_xscale("log")
            plain_log(ax, ("x", ""))
            if span:
                ax.set_xlim(*span)
        ax.set_title(title, loc="left")
        ax.set_xlabel("ms, log scale")
        ax.grid(axis="y", visible=False)
    axes[0].set_yticks(rows, labels)
    axes[0].set_ylim(len(labels) - 0.5, -0.6)  # the first run on top, room above it for its limit's figure
    shown: dict[str, Any] = {}
    for j, (name, marker, color) in enumerate(PERCENTILES):  # named where drawn, even if only hollow
        if any((s.p50, s.p90, s.p99)[j] is not None for _, spreads in panels for s in spreads):
            shown[name] = axes[0].scatter([], [], marker=marker, s=26, color=color)
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            shown.setdefault(label, handle)
    if aside:
        shown["hollow: INVALID or contended run"] = axes[0].scatter(
            [], [], marker="o", s=26, facecolors="none", edgecolors=NEUTRAL
        )
    if off:
        shown["off the scale (at its edge)"] = axes[0].scatter(
            [], [], marker=">", s=36, facecolors="none", edgecolors=NEUTRAL
        )
    if shown:  # under the axes: wherever a legend sits inside, some run's marks lie beneath it
        fig.legend(list(shown.values()), list(shown), fontsize=7, loc="outside lower center", ncols=min(len(shown), 4))


def _limit(ax: "Axes", limit: float, row: int, span: tuple[float, float] | None) -> None:
    """A run's p99 limit: a red bar across its row with the figure beside it, or, where it lies beyond the span
    the clean runs set (an INVALID run held to a far tighter limit), its figure at the edge, pointing its way."""
    if span and not span[0] <= limit <= span[1]:
        left = limit < span[0]
        ax.annotate(
            f"\u25c2 limit {limit:,.4g}" if left else f"limit {limit:,.4g} \u25b8",
            (span[0] if left else span[1], row - 0.45),
            xytext=(2 if left else -2, 0),
            textcoords="offset points",
            va="top",
            ha="left" if left else "right",
            fontsize=6.5,
            color=BAD,
        )
        return
    ax.plot([limit] * 2, [row - 0.4, row + 0.4], color=BAD, linewidth=2, zorder=2, label="p99 limit")
    ax.annotate(
        f"{limit:,.4g}",
        (limit, row - 0.45),
        xytext=(2, 0),
        textcoords="offset points",
        va="top",
        fontsize=6.5,
        color=BAD,
    )


def draw_turns(fig: "Figure", turns: Sequence[Turn]) -> None:
    """A conversation run's median and p99 TTFT (y, ms, from zero) at each turn (x), each turn's mean prompt
    tokens under its number: the history grows turn by turn, and a turn's prefill with it (unless a prefix cache
    serves it), so the x axis reads as both. The median's figure is written beside its point (up to
    :data:`TURN_LABELS` turns); the p99 is dashed, the tail of the same requests."""
    ax = fig.add_subplot()
    drawn = False
    for name, marker, color in (PERCENTILES[0], PERCENTILES[2]):
        pts = [(t.turn, v) for t in turns if (v := getattr(t, name)) is not None]
        if not pts:
            continue
        drawn = True
        ax.plot(
            [x for x, _ in pts],
            [y for _, y in pts],
            marker=marker,
            color=color,
            linestyle="-" if name == "p50" else "--",
            label=f"TTFT {name}",
        )
        if name == "p50" and len(pts) <= TURN_LABELS:
            for x, y in pts:
                ax.annotate(
                    f"{y:,.3g}", (x, y), xytext=(0, 4), textcoords="offset points", ha="center", va="bottom",
                    fontsize=6.5,
                )  # fmt: skip
    step = max(1, -(-len(turns) // TURN_LABELS))  # every turn's tick where they fit, else every step-th
    ticked = list(turns)[::step]
    ax.set_xticks(
        [t.turn for t in ticked],
        [f"{t.turn}\n{t.prompt_tokens:,.0f} tok" if t.prompt_tokens is not None else str(t.turn) for t in ticked],
    )
    ax.set_xlabel("turn (and its mean prompt tokens: the history so far)")
    ax.set_ylabel("TTFT (ms)")
    ax.set_ylim(0, None)
    ax.grid(axis="x", visible=False)
    if drawn:
        ax.legend(fontsize=7, loc="best")  # wherever it hides no turn's point
