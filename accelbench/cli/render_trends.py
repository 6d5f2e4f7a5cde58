"""Tables that set figures side by side: two runs (compare), a series over runs (history), device counts
(scaling). The figures and verdicts come from ``accelbench.results``; only the words and colours are here."""

from __future__ import annotations

from rich.console import JustifyMethod
from rich.markup import escape
from rich.table import Table

from accelbench.results import format as fmt
from accelbench.results.compare import BESIDE, Comparison, Row
from accelbench.results.history import Series
from accelbench.results.judge import ALPHA, MIN_EFFECT_SINGLE, MIN_RUNS_BARE
from accelbench.results.record import Metric
from accelbench.results.scaling import ScalingRow


def compare_table(comparison: Comparison, baseline: str, candidate: str) -> Table:
    """The pairs with a speedup that reads the same way for every metric (>1: the candidate is better),
    and, below, what had no partner or was measured more than once."""
    rows = comparison.rows
    table = Table(title=f"{escape(candidate)} vs {escape(baseline)}", title_justify="left", caption_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("benchmark", "left"),
        ("workload", "left"),
        ("metric", "left"),
        ("baseline", "right"),
        ("candidate", "right"),
        ("speedup", "right"),
        ("verdict", "left"),
    )
    for col, just in columns:
        table.add_column(col, justify=just)
    # performance per dollar and per joule beside performance, where both sides carry the figure
    extra = [label for label in ("per $", "per J") if any(r.efficiency_speedup(label) is not None for r in rows)]
    for label in extra:
        for col in (f"baseline {label}", f"candidate {label}", label):
            table.add_column(col, justify="right")
    # a serving run's latency figures (TTFT, TPOT p99) beside its rate, each side's
    beside = [label for label in BESIDE if any(label in r.beside for r in rows)]
    for label in beside:
        table.add_column(f"{label} (baseline -> candidate)", justify="right")
    for r in rows:
        table.add_row(*_compare_cells(r, extra, beside))
    lines = _verdict_lines(comparison)
    for label, names in (
        (f"only in {baseline}", comparison.only_baseline),
        (f"only in {candidate}", comparison.only_candidate),
        ("measured more than once (the runs kept are pooled as repeats)", comparison.repeated),
    ):
        if names:
            lines.append(f"{escape(label)}: {escape(', '.join(names))}")
    if "per $" in extra:
        lines.append("per $: each side's figure per USD/h of its machine (or its cost), at the price its records carry")
    if "per J" in extra:
        lines.append("per J: each side's work per joule of measured board/package energy (or its energy to target)")
    table.caption = "\n".join(lines) or None
    return table


_COLOUR = {"faster": "green", "better": "green", "slower": "red", "worse": "red"}


def _side(m: Metric, valid: bool | None, runs: int) -> str:
    """One side's figure with its interval, how many runs it pooled, and INVALID where it was."""
    pooled = f" ({runs} runs)" if runs > 1 else ""
    return f"{fmt.metric(m)} {fmt.ci_percent(m)}{pooled}" + (" [red]INVALID[/]" if valid is False else "")


def _compare_cells(r: Row, extra: list[str], beside: list[str]) -> list[str]:
    """A pair's row: both sides, the speedup and the verdict, then the efficiency and beside columns."""
    v = r.brief  # the reasons in full are in the caption and --json
    cells = [
        escape(r.benchmark),
        escape(r.workload),
        escape(r.metric),
        _side(r.baseline, r.baseline_valid, r.baseline_runs),
        _side(r.candidate, r.candidate_valid, r.candidate_runs),
        f"{r.speedup:.2f}x" if r.judged else "[dim]-[/]",  # a set-aside pair's ratio is no evidence
        f"[{_COLOUR.get(v, 'dim')}]{escape(v)}[/]",
    ]
    for label in extra:
        s = r.efficiency_speedup(label)
        b, c = r.efficiency.get(label, (None, None))
        cells += [escape(fmt.metric(b)), escape(fmt.metric(c)), f"{s:.2f}x"] if s is not None and b and c else [""] * 3
    for label in beside:
        pair = r.beside.get(label)
        cells.append(escape(" -> ".join(fmt.metric(m) for m in pair)) if pair else "")
    return cells


def _verdict_lines(comparison: Comparison) -> list[str]:
    """The caption's account of the verdicts: the geometric mean, the pairs not judged and why, and the rule."""
    judged = comparison.judged
    lines = []
    gm = comparison.geometric_mean()
    if gm is not None:
        apart = len(comparison.separated)
        told = "none" if not apart else ("all" if apart == len(judged) else str(apart))
        lines.append(
            f"geometric mean speedup of candidate over baseline: {gm:.2f}x over {len(judged)} judged pair(s), "
            f"{told} told apart from noise"
        )
    footer = comparison.footer()
    if footer:
        lines.append(f"[yellow]{escape(footer)}[/]")
    partial = sum(1 for r in comparison.rows if r.judged and (r.baseline_set_aside or r.candidate_set_aside))
    if partial:
        lines.append(f"[yellow]{partial} judged pair(s) were judged on the runs left after some were set aside[/]")
    reasons = comparison.reasons()
    lines += [f"  {escape(w)}" for w in reasons[:6]]
    if len(reasons) > 6:
        lines.append(f"  ... and {len(reasons) - 6} more reasons ('compare --json' has each row's)")
    if judged:
        lines.append(
            f"verdicts: the raw samples told apart (Mann-Whitney p < {ALPHA:g}, else the 95% intervals apart; a "
            f"figure with no interval within a run, as LoadGen's: {MIN_RUNS_BARE}+ runs a side all apart, which "
            "chance alone gives 3+3 runs once in 10) and a change beyond the run-to-run spread (where fewer than "
            f"3 runs measure it, beyond {MIN_EFFECT_SINGLE:.0%}: '--repeat 3' measures it); each row's evidence is "
            "in 'compare --json'"
        )
    return lines


def scaling_table(rows: list[ScalingRow], figure: str = "throughput") -> Table:
    table = Table(title="scaling over devices (batch per device fixed)", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("workload", "left"),
        ("devices", "right"),
        (figure, "right"),
        ("speedup", "right"),
    )
    for col, just in columns:
        table.add_column(col, justify=just)
    table.add_column("efficiency", justify="right")
    notes = any(r.note for r in rows)
    if notes:
        table.add_column("", style="yellow")
    for r in rows:
        speedup = f"{r.speedup:.2f}x" if r.speedup is not None else "-"
        eff = f"{r.efficiency:.0%}" if r.efficiency is not None else "-"
        table.add_row(
            escape(r.workload),
            str(r.devices),
            f"{fmt.metric(r.throughput)} {fmt.ci_percent(r.throughput)}",
            speedup,
            eff,
            *([escape(r.note)] if notes else []),
        )
    return table


def history_table(series: Series) -> Table:
    """One row per run of a series: its figure, its ratio to the earlier runs' median where judged, the flag."""
    name = escape(f"{series.benchmark} {series.workload}: {series.metric}")
    title = f"{name} on system {escape(series.fingerprint[:12])}"
    table = Table(title=title, title_justify="left", caption_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("run", "left"),
        ("started", "left"),
        (series.metric, "right"),
        ("change", "right"),
        ("", "left"),
    )
    for col, just in columns:
        table.add_column(escape(col), justify=just)
    flagged = {c.index: c for c in series.changes}
    for i, p in enumerate(series.points):
        c = flagged.get(i)
        change = f"{c.ratio:.2f}x" if c else ""
        flag = {"regression": "[red]regression[/]", "improvement": "[green]improvement[/]"}[c.kind] if c else ""
        if p.valid is False:
            flag = "[red]INVALID[/] (not judged)"
        elif p.set_aside:
            flag = f"[yellow]not judged: {escape('; '.join(p.set_aside))}[/]"
        elif p.metric.ci95 is None:
            flag = "[dim]no CI (not judged)[/]"
        value = f"{fmt.metric(p.metric)} {fmt.ci_percent(p.metric)}"
        table.add_row(escape(p.run_id), p.started_at[:16].replace("T", " "), value, change, flag)
    if series.unstable:
        table.caption = f"[yellow]unstable[/]: {escape(series.unstable)}"
    return table
