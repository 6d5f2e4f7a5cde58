"""Time to accuracy: each seed's quality curve against time and epochs, the target, the olympic score."""

from __future__ import annotations

from functools import partial
from typing import Any

import accelbench.report.charts as charts
from accelbench.families import Family
from accelbench.families.builtin import TTA
from accelbench.report.common import (
    MAX_CHARTS,
    ReportInput,
    caveat,
    family_section,
    figure,
    newest_first,
    of_runs,
    on_system,
    standing,
    status_cell,
    system_cells,
    verdict,
)
from accelbench.report.model import Cell, Chart, Section, Table
from accelbench.results import format as fmt
from accelbench.results.details import score_of, typed
from accelbench.results.record import Result


def headlines(inp: ReportInput, recs: list[Result]) -> list[str]:
    """The summary's lines on time to accuracy: each score with the seeds it is the olympic mean of."""
    return [
        f"Time to accuracy, {inp.name(r)}: {figure(r.primary)} ({_scored(score_of(r).get('runs'))})"
        f"{on_system(inp, r)}{caveat(r)}{of_runs(n)}."
        for r, n in standing(inp, [r for r in recs if r.primary is not None])  # INVALID by the seed rule: no time
    ]


def tta(inp: ReportInput, family: Family = TTA) -> Section | None:
    opened = family_section(
        inp,
        family,
        "tta",
        "Time to accuracy",
        "Each seed trains until the quality target; the score is MLPerf Training's olympic mean (the fastest "
        "and the slowest seed dropped). Spread is (slowest - fastest) / the mean of the seeds that reached the "
        "target: the luck a single run carries.",
    )
    if opened is None:
        return None
    recs, labels, section = opened
    multi = len(labels) > 1
    # records from several runs: each row says its run, and a chart the run it draws (only a workload's newest
    # run on a system is drawn)
    runs = len({r.run_id for r in recs}) > 1
    rows = []
    drawn = 0
    seen: set[tuple[str, str]] = set()
    for r in newest_first(recs):
        rows.append(system_cells(labels, r, multi) + ([r.run_id] if runs else []) + _row(inp, r))
        goals = _goals(r)
        seeds = typed(r).get("seeds") or []
        charted = [(metric, goal, _curves(seeds, key)) for metric, key, goal in goals]
        charted = [c for c in charted if c[2]]
        if not charted or drawn >= MAX_CHARTS or (r.fingerprint, inp.name(r)) in seen:
            continue
        seen.add((r.fingerprint, inp.name(r)))
        title = f"{inp.name(r)}" + (f" on {labels[r.fingerprint]}" if multi else "")
        title += f", run {r.run_id}" if runs else ""
        for metric, goal, curves in charted[: MAX_CHARTS - drawn]:
            section.blocks.append(_chart(drawn, title, metric, goal, curves, goals))
            drawn += 1
    cols = (
        (["system"] if multi else [])
        + (["run"] if runs else [])
        + [
            "workload",
            "status",
            "verdict",
            "time to target",
            "spread",
            "epochs",
            "seeds at target",
            "throughput",
            "cost",
        ]
    )
    section.blocks.append(Table(cols, rows, numeric=frozenset(range(len(cols) - 6, len(cols)))))
    return section


def _row(inp: ReportInput, r: Result) -> list[str | Cell]:
    """A record's cells from the workload on: its score, spread, epochs, seeds at target, throughput and cost."""
    score = score_of(r)
    seeds = typed(r).get("seeds") or []
    spread = r.metrics.get("time_to_target_spread")
    ep = r.metrics.get("epochs_to_target")
    return [
        inp.name(r),
        status_cell(r),
        verdict(r.valid),
        figure(r.primary) if r.status == "ok" else (r.error or r.reason or ""),
        f"{spread.value:.0%}" if spread else "",
        fmt.number(ep.value, 3) if ep else "",
        f"{score.get('converged', '?')} of {score.get('runs', len(seeds))}" if seeds else "",
        figure(r.metrics.get("throughput")),
        figure(r.metrics.get("cost_to_target_usd")),
    ]


def _goals(r: Result) -> list[tuple[str, str, Any]]:
    """Each metric the run had to reach (Mask R-CNN: box AP, then mask AP): its name, its key in the seeds'
    evaluations, and its target."""
    target = typed(r).get("target", r.params.get("target"))
    goals = [(str(typed(r).get("metric", "quality")), "quality", target)]
    goals += [(name, name, t) for name, t in (typed(r).get("more_targets") or {}).items()]
    return goals


def _chart(
    i: int,
    title: str,
    metric: str,
    goal: Any,
    curves: list[tuple[str, list[tuple[float, float, float]]]],
    goals: list[tuple[str, str, Any]],
) -> Chart:
    """The seeds' curves of one metric against time and epochs, with its target (and the others' where several)."""
    together = f" (reached together: {', '.join(f'{m} {t:g}' for m, _, t in goals)})" if len(goals) > 1 else ""
    return Chart(
        f"tta-{i}",
        title + (f": {metric}" if together else ""),
        f"{metric} against training time and against epochs for {_seeds(len(curves))}, target {goal}" + together,
        partial(
            charts.draw_curves,
            seeds=curves,
            target=float(goal) if goal is not None else None,
            quality=metric,
        ),
    )


def _curves(seeds: list[dict[str, Any]], key: str) -> list[tuple[str, list[tuple[float, float, float]]]]:
    """Each seed's (seconds, epoch, value of ``key``) over its evaluations; seeds without any left out."""
    curves = [
        (
            f"seed {s.get('seed')}" + ("" if s.get("converged") else " (no target)"),
            [(float(p["seconds"]), float(p["epoch"]), float(p[key])) for p in s.get("curve") or [] if key in p],
        )
        for s in seeds
    ]
    return [c for c in curves if c[1]]


def _scored(n: int | None) -> str:
    """How the figure was scored: MLPerf's olympic mean drops the fastest and slowest only from 3 seeds up."""
    if n is not None and n < 3:
        return "one seed" if n == 1 else "mean of 2 seeds"
    return f"olympic mean of {_seeds(n)}"


def _seeds(n: int | None) -> str:
    return "? seeds" if n is None else f"{n} seed" + ("" if n == 1 else "s")
