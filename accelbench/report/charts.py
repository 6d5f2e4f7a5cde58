"""The charts of a report, drawn with matplotlib from plain numbers (never from records or families).

Each ``draw_*`` function fills a Figure; :func:`svg` and :func:`png` render a :class:`Chart`. Only the
object-oriented API is used (no pyplot), so drawing neither needs a display nor touches the global state
of a program that imports accelbench. The token runs' own charts (a sweep's curve, TTFT and TPOT against their
limits) are in :mod:`accelbench.report.charts_tokens`, drawn with these helpers.
"""

from __future__ import annotations

import functools
import io
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, cast

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import XAxis, YAxis
    from matplotlib.figure import Figure
    from matplotlib.ticker import Locator
    from matplotlib.typing import RcKeyType

    from accelbench.report.model import Chart

#: Okabe-Ito: distinguishable with the common colour-vision deficiencies, and in greyscale print
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
PNG_DPI = 110
GOOD, BAD, NEUTRAL = "#009E73", "#D55E00", "#777777"
STYLE: dict[RcKeyType, Any] = {
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.fonttype": "path",  # glyphs as paths: the page needs no font from anywhere
    "svg.hashsalt": "accelbench",  # stable ids: the same records give the same file
}


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    ci95: tuple[float, float] | None = None


def _draw(job: tuple["Chart", tuple[str, ...]]) -> dict[str, bytes]:
    """One chart in each format asked for: the Figure is built once and saved once per format."""
    import matplotlib
    from matplotlib.figure import Figure

    chart, kinds = job
    out = {}
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=chart.size, layout="constrained")
        chart.draw(fig)
        for kind in kinds:
            buf = io.BytesIO()
            meta = {"Date": None} if kind == "svg" else {"Software": None}
            fig.savefig(buf, format=kind, dpi=PNG_DPI, metadata=meta)
            out[kind] = buf.getvalue()
    return out


def render(charts: Sequence["Chart"], kinds: tuple[str, ...]) -> list[dict[str, bytes]]:
    """Every chart in every format, on all cores when there are several charts: drawing is most of a report's
    time (a third of it in matplotlib's layout), and each chart is independent plain data."""
    jobs = [(c, kinds) for c in charts]
    workers = min(len(jobs) // 2, os.cpu_count() or 1, 8)
    if workers < 2:
        return [_draw(j) for j in jobs]
    # forkserver: a worker never inherits the threads of a program that imported torch before the report
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver")) as pool:
        return list(pool.map(_draw, jobs))


def plain_log(ax: "Axes", *axes: tuple[str, str]) -> None:
    """Log axes labelled 0.2 and 3x, not 2x10^-1: a reader should not decode exponents. The labelled ticks are
    as many as the axis' length fits (:class:`FewLogTicks`: 1, 2, 3 and 5 in a decade where they fit, every
    decade or every other where they do not); the other ticks are left unlabelled, since a label at every
    minor tick runs them into one another ('400500600700', '20,00050,000')."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    for name, suffix in axes:
        axis = ax.xaxis if name == "x" else ax.yaxis
        axis.set_major_formatter(FuncFormatter(lambda v, _, s=suffix: f"{v:,.6g}{s}"))
        axis.set_major_locator(FewLogTicks(base=getattr(axis.get_transform(), "base", 10)))
        axis.set_minor_formatter(NullFormatter())


@functools.cache
def _few_log_ticks() -> Callable[[float], Locator]:
    """The class behind :func:`FewLogTicks`, built on first use: matplotlib is imported only when a chart is
    drawn, never when a report module is."""
    import math

    from matplotlib.ticker import Locator, MaxNLocator

    class _FewLogTicks(Locator):
        """Ticks on a log axis, the densest set whose labels fit the axis' length without touching, judged from
        each label's text (its major formatter's) at the size it is drawn: 1-9, then 1/2/3/5, 1/2/5, 1/3 and 1
        per decade, then every 2nd, 3rd... decade (or power of a base other than 10); an axis spanning less than
        a decade gets round linear steps (22k, 24k) where no such tick falls in it. Called at every draw, so a
        panel that the layout narrows gets fewer labels, never colliding ones."""

        MANTISSAS = ((1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 5), (1, 2, 5), (1, 3), (1,))

        def __init__(self, base: float = 10) -> None:
            self.base = base

        @property
        def _axis(self) -> XAxis | YAxis:
            """The axis this locator is set on: matplotlib sets it before it asks for ticks."""
            return cast("XAxis | YAxis", self.axis)

        def __call__(self) -> list[float]:
            lo, hi = self._axis.get_view_interval()
            return self.tick_values(lo, hi)

        def _room(self) -> tuple[float, float, bool]:
            """The axis' length and its tick labels' font size, in points, and whether it runs across."""
            axis = self._axis
            across = axis.axis_name == "x"
            box = axis.axes.get_position(original=False)
            fig = cast("Figure", axis.axes.get_figure(root=True))  # an axis being drawn is on a figure
            width, height = fig.get_size_inches()
            length = (box.width * width if across else box.height * height) * 72
            size = axis.majorTicks[0].label1.get_fontsize()
            return length, float(size), across

        def _fits(self, ticks: list[float], lo: float, hi: float) -> bool:
            length, size, across = self._room()
            fmt = self._axis.get_major_formatter()
            extent = [len(fmt(v, i)) * 0.65 * size if across else 1.2 * size for i, v in enumerate(ticks)]
            span = math.log(hi / lo)
            at = [math.log(v / lo) / span * length for v in ticks]
            gap = 0.8 * size if across else 0.3 * size
            return all(at[i + 1] - at[i] >= (extent[i] + extent[i + 1]) / 2 + gap for i in range(len(ticks) - 1))

        def _candidates(self, lo: float, hi: float) -> list[list[float]]:
            first, last = math.floor(math.log(lo, self.base)) - 1, math.ceil(math.log(hi, self.base)) + 1
            powers = range(first, last + 1)

            def within(values: Iterable[float]) -> list[float]:
                return sorted(v for v in values if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9))

            sets = [within(m * 10.0**k for k in powers for m in ms) for ms in self.MANTISSAS] if self.base == 10 else []
            sets += [within(float(self.base) ** k for k in powers if k % step == 0) for step in (1, 2, 3, 4, 5, 10)]
            return sets

        def tick_values(self, vmin: float, vmax: float) -> list[float]:
            lo, hi = sorted((vmin, vmax))
            if lo <= 0 or hi <= lo:
                return []
            sets = self._candidates(lo, hi)
            if max(map(len, sets)) < 2:  # less than a decade with no 1/2/3/5 tick inside: round linear steps
                sets = [[v for v in MaxNLocator(n).tick_values(lo, hi) if lo <= v <= hi] for n in (6, 4, 3, 2)] + sets
            for least in (2, 1):
                for ticks in sets:
                    if len(ticks) >= least and self._fits(ticks, lo, hi):
                        return ticks
            return []

    return _FewLogTicks


def FewLogTicks(base: float = 10) -> "Locator":  # noqa: N802 (a class to its callers)
    """A log axis' major locator whose ticks' labels fit its length without touching (see
    :func:`_few_log_ticks`): the default labels a tick per decade and per minor step however narrow the panel."""
    return _few_log_ticks()(base)


def _plain_linear(ax: "Axes") -> None:
    """A linear x axis labelled 1.5M and 20k rather than 1.5 with '1e6' in the corner."""
    from matplotlib.ticker import FuncFormatter

    def short(v: float, _: int) -> str:
        for low, scale, unit in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
            if abs(v) >= low:
                return f"{v / scale:,.4g}{unit}"
        return f"{v:,.6g}"

    ax.xaxis.set_major_formatter(FuncFormatter(short))


def _errors(bars: Sequence[Bar]) -> list[list[float]] | None:
    if not any(b.ci95 for b in bars):
        return None
    lo = [b.value - b.ci95[0] if b.ci95 else 0.0 for b in bars]
    hi = [b.ci95[1] - b.value if b.ci95 else 0.0 for b in bars]
    return [[max(v, 0.0) for v in lo], [max(v, 0.0) for v in hi]]


def distinct(labels: Sequence[str], *hints: Sequence[str]) -> list[str]:
    """``labels`` made unique: a label shared by several bars gets its first hint ('(run 20261122-...)'),
    one still shared its next hint, and a number where the hints run out. Two bars under one label read as
    one result drawn twice, and a reader cannot tell which is which."""
    out = list(labels)
    for hint in hints:
        counts = {x: out.count(x) for x in out}
        out = [f"{x} ({h})" if counts[x] > 1 and h else x for x, h in zip(out, hint, strict=True)]
    counts = {x: out.count(x) for x in out}
    seen: dict[str, int] = {}
    for i, x in enumerate(out):
        if counts[x] > 1:
            seen[x] = seen.get(x, 0) + 1
            out[i] = f"{x} #{seen[x]}"
    return out


def _value_labels(ax: "Axes", bars: Sequence[Bar]) -> None:
    """Each bar's figure at its end: on a linear axis from zero a CPU beside an H100 is a sliver, and the
    number is what the reader needs from it."""
    top = max((b.ci95[1] if b.ci95 else b.value) for b in bars)
    for i, b in enumerate(bars):
        end = b.ci95[1] if b.ci95 else b.value
        ax.annotate(f"{b.value:,.4g}", (end, i), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7.5)
    ax.set_xlim(0, top * 1.18)  # room for the last label inside the axes


def draw_bar_panels(
    fig: "Figure",
    panels: Sequence[tuple[str, str, Sequence[Bar]]],
    highlight_first: bool = False,
    values: bool = False,
) -> None:
    """One panel per (title, unit, bars): figures in different units never share an axis. The axis is
    linear and starts at zero, so a bar's length is its figure and two bars' lengths are their ratio (a
    log axis from an arbitrary value makes a 2x gap look like any other); ``values`` writes each figure at
    its bar's end, for bars that span orders of magnitude (a CPU beside an H100); ``highlight_first``: this
    machine among others. Labels are made distinct, so two bars never share one."""
    heights = [len(bars) + 1.5 for _, _, bars in panels]
    axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights}).ravel()
    for ax, (title, unit, bars) in zip(axes, panels, strict=True):
        y = list(range(len(bars)))
        colors = [PALETTE[1] if i == 0 else NEUTRAL for i in y] if highlight_first else [PALETTE[i % 8] for i in y]
        ax.barh(y, [b.value for b in bars], xerr=_errors(bars), color=colors, capsize=3)
        ax.set_yticks(y, distinct([b.label for b in bars]))
        ax.invert_yaxis()
        ax.set_title(title, loc="left")
        ax.set_xlabel(unit)
        ax.grid(axis="y", visible=False)
        ax.set_xlim(left=0)
        _plain_linear(ax)
        if values and bars:
            _value_labels(ax, bars)


def draw_roofline(
    fig: "Figure",
    points: Sequence[tuple[str, float, float]],
    roofs: Sequence[tuple[str, float]],
    bandwidth: tuple[str, float] | None,
) -> None:
    """Achieved TFLOPS against FLOP/byte under the compute roofs and the memory-bandwidth slope."""
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [p[1] for p in points] or [1.0]
    x_lo, x_hi = min(xs) / 4, max(xs) * 4
    grid = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
    for i, (label, peak) in enumerate(roofs):
        if bandwidth:
            ys = [min(peak, bandwidth[1] / 1000 * x) for x in grid]  # GB/s x FLOP/B = GFLOPS
        else:
            ys = [peak] * len(grid)
        ax.plot(grid, ys, color=PALETTE[i % 8], linewidth=1.4, label=label)
    if bandwidth and not roofs:
        ax.plot(grid, [bandwidth[1] / 1000 * x for x in grid], color=NEUTRAL, linewidth=1.4)
    if bandwidth:
        ax.plot([], [], color=NEUTRAL, linestyle="none", label=bandwidth[0])
    kinds = sorted({p[0] for p in points})
    markers = "osD^v<>ph*"
    for i, kind in enumerate(kinds):
        mine = [p for p in points if p[0] == kind]
        ax.scatter([p[1] for p in mine], [p[2] for p in mine], marker=markers[i % 10], color="black", s=18, label=kind)
    plain_log(ax, ("x", ""), ("y", ""))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOPS (TOPS for int8)")
    # under the axes, never inside them: wherever a legend sits inside, some set of kernels lies beneath it
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncols=min(3, max(len(labels), 1)))


def draw_scaling(fig: "Figure", series: Sequence[tuple[str, Sequence[tuple[int, float]]]]) -> None:
    """Speedup over one device against the device count, with the ideal (linear) line."""
    ax = fig.add_subplot()
    top = max((n for _, pts in series for n, _ in pts), default=1)
    ax.plot([1, top], [1, top], color=NEUTRAL, linestyle="--", linewidth=1, label="ideal (linear)")
    for i, (label, pts) in enumerate(series):
        ax.plot([n for n, _ in pts], [s for _, s in pts], marker="o", color=PALETTE[i % 8], label=label)
    ax.set_xlabel("devices")
    ax.set_ylabel("speedup over 1 device")
    ax.set_xticks(sorted({n for _, pts in series for n, _ in pts}))
    ax.legend(fontsize=7)


def draw_curves(
    fig: "Figure",
    seeds: Sequence[tuple[str, Sequence[tuple[float, float, float]]]],
    target: float | None,
    quality: str,
) -> None:
    """Quality against training time and against epochs, one line per seed: (seconds, epoch, quality)."""
    left, right = fig.subplots(1, 2, sharey=True)
    for i, (label, pts) in enumerate(seeds):
        color = PALETTE[i % 8]
        left.plot([p[0] for p in pts], [p[2] for p in pts], marker=".", color=color, label=label)
        right.plot([p[1] for p in pts], [p[2] for p in pts], marker=".", color=color, label=label)
    for ax, xlabel in ((left, "training time (s)"), (right, "epoch")):
        if target is not None:
            ax.axhline(target, color=BAD, linestyle="--", linewidth=1, label=f"target {target:g}")
        ax.set_xlabel(xlabel)
    left.set_ylabel(quality)
    right.legend(fontsize=7, loc="lower right")


def draw_trials(
    fig: "Figure", trials: Sequence[tuple[float, float, bool, bool]], bound_ms: float | None, xlabel: str
) -> None:
    """find-peak: each trial's load (x) against its 99th-percentile latency (y): (load, p99 ms, ok, confirm)."""
    ax = fig.add_subplot()
    for ok in (True, False):
        for confirm in (False, True):
            mine = [t for t in trials if t[2] is ok and t[3] is confirm]
            if not mine:
                continue
            label = ("confirmation" if confirm else "screening") + (" (held)" if ok else " (failed)")
            ax.scatter(
                [t[0] for t in mine],
                [t[1] for t in mine],
                marker="*" if confirm else ("o" if ok else "x"),
                s=70 if confirm else 28,
                color=GOOD if ok else BAD,
                label=label,
            )
    if bound_ms:
        ax.axhline(bound_ms, color=NEUTRAL, linestyle="--", linewidth=1, label=f"latency bound {bound_ms:g} ms")
    ax.set_yscale("log")
    plain_log(ax, ("y", ""))  # a saturated trial's latency is 10-100x the bound; the ones near it matter
    ax.set_xlabel(xlabel)
    ax.set_ylabel("p99 latency (ms, log scale)")
    ax.legend(fontsize=7)


def draw_history(
    fig: "Figure",
    points: Sequence[tuple[str, float, tuple[float, float] | None, str]],
    unit: str,
) -> None:
    """A figure over runs, oldest first: (label, value, ci95, mark) with mark '', 'regression', 'improvement' or
    'set aside' (contended, noisy, INVALID: drawn hollow and grey, off the line, so a dip it shows is not read as
    the machine's)."""
    ax = fig.add_subplot()
    x = list(range(len(points)))
    kept = [i for i, p in enumerate(points) if p[3] != "set aside"]
    bars = [Bar(points[i][0], points[i][1], points[i][2]) for i in kept]
    ax.errorbar(kept, [points[i][1] for i in kept], yerr=_errors(bars), color=PALETTE[0], marker="o", capsize=3)
    aside = [i for i in x if i not in kept]
    if aside:
        ax.scatter(aside, [points[i][1] for i in aside], s=40, facecolors="none", edgecolors=NEUTRAL, label="set aside")
        ax.legend(fontsize=7)
    for i, p in enumerate(points):
        if p[3] in ("regression", "improvement"):
            ax.scatter([i], [p[1]], s=120, facecolors="none", edgecolors=BAD if p[3] == "regression" else GOOD)
    ax.set_xticks(x, [p[0] for p in points], rotation=30, ha="right")
    ax.set_ylabel(unit)


def draw_ratios(fig: "Figure", rows: Sequence[tuple[str, float, str]], geomean: float | None, title: str) -> None:
    """Speedup of the candidate per workload (log scale, 1 = equal), coloured by the verdict."""
    ax = fig.add_subplot()
    y = list(range(len(rows)))
    colors = [GOOD if v in ("faster", "better") else BAD if v in ("slower", "worse") else NEUTRAL for _, _, v in rows]
    ax.barh(y, [r[1] - 1 for r in rows], left=1, color=colors)
    ax.set_xscale("log")
    plain_log(ax, ("x", "x"))
    ax.axvline(1, color="black", linewidth=0.8)
    if geomean:
        ax.axvline(geomean, color=PALETTE[0], linestyle="--", linewidth=1, label=f"geometric mean {geomean:.3g}x")
        ax.legend(fontsize=7)
    ax.set_yticks(y, [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("speedup (> 1: candidate better)")
    ax.set_title(title, loc="left")
    ax.grid(axis="y", visible=False)


#: what a point's mark says, in its legend entry: a VALID, uncontended run's point is filled; a contended (or
#: otherwise set-aside) run's hollow; an INVALID run's a cross; one beyond the axes a triangle at their edge
MARK_WORDS = {
    "": "VALID, uncontended (filled)",
    "INVALID": "INVALID (cross)",
    "off scale": "off the scale (at its edge)",
}


def mark_style(mark: str, color: str) -> dict[str, Any]:
    """The scatter keywords of a point by its ``mark`` ('' clean, 'INVALID', 'contended' or another reason it was
    set aside), in its series' ``color``: the mark tells what a point is worth, the colour which series it is, so
    a contended or INVALID run stays in its series yet never reads as a clean figure of it."""
    if mark == "INVALID":
        return {"marker": "x", "color": color, "linewidths": 1.3}
    if mark:
        return {"marker": "o", "facecolors": "none", "edgecolors": color}
    return {"marker": "o", "color": color}


def clean_limits(clean: Iterable[float], log: bool = False, zero: bool = False) -> tuple[float, float] | None:
    """An axis' span from its clean points' values (VALID, uncontended runs) with a margin, from zero where
    ``zero``: one INVALID or contended run far off would otherwise squeeze every clean point into a corner.
    None where no point is clean (the axis then scales to all of them)."""
    values = [v for v in clean if v is not None and (v > 0 or not log)]
    if not values:
        return None
    lo, hi = min(values), max(values)
    if log:
        margin = max((hi / lo) ** 0.06, 1.2)
        return lo / margin, hi * margin
    if zero:
        return 0.0, hi * 1.1 if hi > 0 else 1.0
    pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
    return lo - pad, hi + pad


def _edge(v: float, span: tuple[float, float] | None, below: str, above: str) -> tuple[float, str]:
    """``v`` held to ``span``, and the triangle pointing the way it lies beyond ('' where within)."""
    if span is None or span[0] <= v <= span[1]:
        return v, ""
    return (span[0], below) if v < span[0] else (span[1], above)


def draw_mark(
    ax: "Axes",
    x: float,
    y: float,
    mark: str,
    color: str,
    xspan: tuple[float, float] | None = None,
    yspan: tuple[float, float] | None = None,
    **kw: Any,
) -> bool:
    """One point, styled by its mark (:func:`mark_style`); where it lies beyond the spans the clean points set,
    a triangle at the edge, pointing its way, so it is seen and yet sets no scale. True where it was off scale."""
    x, across = _edge(x, xspan, "<", ">")
    y, up = _edge(y, yspan, "v", "^")
    if across or up:
        style: dict[str, Any] = {"marker": across or up, "facecolors": "none", "edgecolors": color}
        ax.scatter([x], [y], s=36, zorder=4, clip_on=False, **style, **kw)
        return True
    ax.scatter([x], [y], s=30, zorder=3, **mark_style(mark, color), **kw)
    return False


def mark_legend(ax: "Axes", marks: Iterable[str], off_scale: bool = False, color: str = NEUTRAL) -> None:
    """Legend entries (grey, so they name no series) for the marks drawn, where any point is not clean: what a
    hollow point, a cross and a triangle at the edge mean."""
    present = sorted(set(marks), key=lambda m: (m != "", m != "INVALID", m))
    if present == [""] and not off_scale:
        return
    for m in present:
        ax.scatter([], [], s=30, label=MARK_WORDS.get(m, f"{m} (hollow)"), **mark_style(m, color))
    if off_scale:
        ax.scatter([], [], s=36, marker=">", facecolors="none", edgecolors=color, label=MARK_WORDS["off scale"])


def draw_tradeoff(fig: "Figure", series: Sequence[tuple[str, Sequence[tuple[float, float, str]]]]) -> None:
    """A serving trade-off: output tokens/s per device (y) against tokens/s per user (x), per series of
    (per user, per device, mark) points, the mark '' for a VALID, uncontended run, else what it is ('INVALID',
    'contended': :func:`draw_mark`). Both axes start at zero and end past the clean points, not the others.
    Points are not joined: runs of other loads and limits trace no curve a line could claim."""
    ax = fig.add_subplot()
    xspan = clean_limits((p[0] for _, pts in series for p in pts if not p[2]), zero=True)
    yspan = clean_limits((p[1] for _, pts in series for p in pts if not p[2]), zero=True)
    off = False
    for i, (label, pts) in enumerate(series):
        color = PALETTE[i % 8]
        ax.plot([], [], linestyle="none", marker="o", color=color, label=label)  # the series: its colour
        for x, y, mark in pts:
            off |= draw_mark(ax, x, y, mark, color, xspan, yspan)
    mark_legend(ax, (p[2] for _, pts in series for p in pts), off)
    tradeoff_axes(ax, xspan, yspan)
    legend_below(fig, ax)


def tradeoff_axes(
    ax: "Axes", xspan: tuple[float, float] | None = None, yspan: tuple[float, float] | None = None
) -> None:
    """The serving trade-off's axes (tokens/s per device against tokens/s per user), from zero, to the spans
    the clean points set where there are any (:func:`clean_limits`)."""
    ax.set_xlabel("tokens/s per user (1000 / median TPOT ms)")
    ax.set_ylabel("output tokens/s per device")
    ax.set_xlim(*(xspan or (0, None)))
    ax.set_ylim(*(yspan or (0, None)))
    _plain_linear(ax)


def legend_below(fig: "Figure", ax: "Axes") -> None:
    """``ax``'s legend under the figure's panels, one entry a line where they are long: a series named by its
    server (a URL) or machine does not fit inside a panel, and a legend inside one hides some of its points."""
    handles, labels = ax.get_legend_handles_labels()
    ncols = 1 if max(map(len, labels), default=0) > 45 else min(len(labels), 3) or 1
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncols=ncols)
