"""Across systems and across time: side-by-side comparisons with compare's verdicts, and history."""

from __future__ import annotations

from functools import partial

import accelbench.report.charts as charts
from accelbench import families
from accelbench.report.common import MAX_CHARTS, ReportInput, figure, systems, verdict
from accelbench.report.model import Cell, Chart, Section, Table, Text
from accelbench.results import format as fmt
from accelbench.results import judge
from accelbench.results.compare import BESIDE, Comparison, Defaults, Row, compare, nearest_difference, no_defaults
from accelbench.results.history import Series, histories
from accelbench.results.judge import IDENTITY_PARAMS, MIN_EFFECT_SINGLE, MIN_RUNS_BARE
from accelbench.results.record import Result

_VERDICT_MARK = {"faster": "good", "better": "good", "slower": "bad", "worse": "bad"}


def _groups(inp: ReportInput) -> tuple[str, list[dict[str, list[Result]]]]:
    """What to compare: the systems when there are several; else, for each tag key whose value tells records
    apart (``p=fp32`` / ``p=amp_bf16``), that key's groups, each compared with its first. Groups of one key only:
    a tag set is a question its user asked, and ``c=busy`` against ``p=fp32`` answers none."""
    ok = sorted(inp.ok(), key=lambda r: r.started_at)
    labels = systems(ok)
    if len(labels) > 1:
        groups: dict[str, list[Result]] = {}
        for r in ok:
            groups.setdefault(labels[r.fingerprint], []).append(r)
        return "system", [groups]
    by_key: dict[str, dict[str, list[Result]]] = {}
    for r in ok:
        for k, v in r.tags.items():
            by_key.setdefault(k, {}).setdefault(f"{k}={v}", []).append(r)
    return "tags", [g for g in by_key.values() if len(g) > 1]


def _across(base: list[Result], cand: list[Result], defaults: Defaults) -> list[str]:
    """The one setting two tag groups differ in where that is what the tags name (``p=fp32`` against
    ``p=amp_bf16``: precision), so the pairs are made across it as ``compare --ignore`` would; none where the
    nearest records differ in more, or in what makes another model."""
    differ = nearest_difference(base, cand, defaults=defaults)
    return differ if len(differ) == 1 and differ[0] not in IDENTITY_PARAMS else []


def comparisons(inp: ReportInput, defaults: Defaults = no_defaults) -> Section | None:
    """Each system (or tag value) against the first, workload by workload; ``defaults``: each benchmark's
    parameters at their defaults, which an older record missing a setting is paired as having used."""
    kind, sets = _groups(inp)
    if not sets:
        return None
    section = Section("comparisons", "Comparisons")
    section.blocks.append(_comparisons_note(kind))
    pairs = [(g, names[0], cand) for g in sets for names in [list(g)] for cand in names[1:]]
    for i, (groups, base, cand) in enumerate(pairs):
        across = _across(groups[base], groups[cand], defaults) if kind == "tags" else []
        c = compare(
            groups[base],
            groups[cand],
            ignore=across,
            describe=inp.describe,
            earlier=inp.history,
            defaults=defaults,
            rules=families.unlike,
        )
        title = f"{cand} against {base}" + (f" (paired across {across[0]})" if across else "")
        section.blocks.append(_comparison(Section(f"comparison-{i}", title), i, base, cand, c))
    return section


def _comparisons_note(kind: str) -> Text:
    """How the comparisons pair and judge, said once above them."""
    what = "system against the first" if kind == "system" else "tag value against the first of its key"
    return Text(
        f"Each {what}, workload by workload on the primary figure (groups that differ in one setting, as "
        "p=fp32 and p=amp_bf16 do in precision, are paired across it); speedup > 1 means the candidate is "
        "better whichever way the figure runs. A side that was contended, noisy, INVALID or too short for an "
        "interval is shown but not judged. A difference is called only when the raw samples tell the sides "
        f"apart (Mann-Whitney p < {judge.ALPHA:g}, else the 95% intervals apart; figures with no interval within a "
        f"run, {MIN_RUNS_BARE}+ runs a side all apart) and the change exceeds the spread between runs of the "
        f"same workload on the same system (measured by fewer than 3 runs: {MIN_EFFECT_SINGLE:.0%}). The "
        "geometric mean and the chart count judged pairs only.",
        "note",
    )


def _comparison(sub: Section, i: int, base: str, cand: str, c: Comparison) -> Section:
    """One pair's subsection: the chart of judged ratios, the table, and the workloads only one side measured."""
    if not c.rows:
        sub.blocks.append(Text("No workload was measured on both sides.", "warn"))
        return sub
    gm = c.geometric_mean()
    judged = c.judged
    extra = [x for x in ("per $", "per J") if any(r.efficiency_speedup(x) is not None for r in c.rows)]
    beside = [x for x in BESIDE if any(x in r.beside for r in c.rows)]  # a serving run's TTFT, TPOT
    if judged:
        sub.blocks.append(_ratios_chart(i, base, cand, c, gm))
    sub.blocks.append(
        Table(
            ["workload", "metric", base, "verdict", cand, "verdict", "speedup", "judged"]
            + [col for label in extra for col in (f"{base} {label}", f"{cand} {label}", label)]
            + [f"{label} ({base} -> {cand})" for label in beside],
            [_comparison_row(r, extra, beside) for r in c.rows],
            caption=_comparison_caption(c, gm, extra),
            numeric=frozenset({2, 4, 6} | set(range(8, 8 + 3 * len(extra) + len(beside)))),
        )
    )
    unpaired = [f"only {base}: {w}" for w in c.only_baseline] + [f"only {cand}: {w}" for w in c.only_candidate]
    if unpaired:
        sub.blocks.append(
            Text(
                f"{len(unpaired)} workloads were measured on one side only: "
                + "; ".join(unpaired[:10])
                + (" ..." if len(unpaired) > 10 else ""),
                "note",
            )
        )
    return sub


def _ratios_chart(i: int, base: str, cand: str, c: Comparison, gm: float | None) -> Chart:
    """The judged pairs' speedups (the first 40), with their geometric mean."""
    judged = c.judged
    return Chart(
        f"ratios-{i}",
        f"{cand} over {base}",
        f"Speedup of {cand} over {base} for the {len(judged)} judged of {len(c.rows)} workloads"
        + (f", geometric mean {gm:.3g}x" if gm else ""),
        partial(
            charts.draw_ratios,
            rows=[(f"{r.benchmark.split('/')[-1]} {r.workload}", r.speedup, r.verdict) for r in judged][:40],
            geomean=gm,
            title="",
        ),
        size=(8.0, 1.2 + 0.28 * min(len(judged), 40)),
    )


def _comparison_row(r: Row, extra: list[str], beside: list[str]) -> list[str | Cell]:
    """A paired workload: both figures and verdicts, the speedup, and the efficiency and beside columns."""
    return [
        f"{r.benchmark} {r.workload}",
        r.metric.replace("_", " "),
        figure(r.baseline),
        verdict(r.baseline_valid),
        figure(r.candidate),
        verdict(r.candidate_valid),
        f"{r.speedup:.3g}x" if r.judged else "-",  # a set-aside pair's ratio is no evidence
        Cell(r.brief, _VERDICT_MARK.get(r.verdict, "") or ("" if r.judged else "warn")),
        *(cell for label in extra for cell in _efficiency(r, label)),
        *(_beside(r, label) for label in beside),
    ]


def _comparison_caption(c: Comparison, gm: float | None, extra: list[str]) -> str:
    """The geometric mean, why pairs were not judged, and where a per-$ figure's price came from."""
    return (
        (
            f"Geometric mean of the judged speedups: {gm:.3g}x ({len(c.separated)} of {len(c.judged)} told "
            "apart from noise)."
            if gm
            else ""
        )
        + (f" {c.footer()}: " + "; ".join(_first(c.reasons())) + "." if c.footer() else "")
        + (
            " Per $: each side's figure per USD/h of its machine (or its cost), at the price its records "
            "carry, with its source in the record."
            if "per $" in extra
            else ""
        )
    )


def _beside(r: Row, label: str) -> str:
    """'11.5 s -> 2.50 s' (a latency) or '35.9 -> 105': each side's figure beside the compared one."""
    if label not in r.beside:
        return ""
    return " -> ".join(
        fmt.seconds(m.value / 1e3) if m.unit == "ms" else fmt.number(m.value, 3) for m in r.beside[label]
    )


def _efficiency(r: Row, label: str) -> list[str]:
    s = r.efficiency_speedup(label)
    if s is None:
        return ["", "", ""]
    b, c = r.efficiency[label]
    return [figure(b), figure(c), f"{s:.3g}x"]


def history(inp: ReportInput, defaults: Defaults = no_defaults) -> Section | None:
    """Each workload's figure over the runs on one system (``defaults`` as :func:`comparisons` reads them)."""
    found = histories(inp.history or inp.ok(), describe=inp.describe, defaults=defaults)
    series = [s for s in found if len(s.points) >= 2]
    if not series:
        return None
    labels = systems(inp.history or inp.ok())
    section = Section("history", "History")
    section.blocks.append(
        Text(
            "Each workload's figure over the runs on one system, oldest first. A run is flagged when its 95% "
            "interval leaves the band of the earlier runs' intervals and it moved more than 5%, with at least "
            "3 earlier runs since the last change; a series that scatters by more than 10% is unstable, not "
            "judged. Runs that were contended, noisy, INVALID or without an interval are drawn but set aside: "
            "never flagged, never part of another run's baseline.",
            "note",
        )
    )
    ranked = sorted(series, key=lambda s: (not s.changes, s.unstable is None, -len(s.points)))
    for i, s in enumerate(ranked[:MAX_CHARTS]):
        marks = {c.index: c.kind for c in s.changes}
        points = [
            (
                p.started_at[:19].replace("T", " "),
                p.metric.value,
                p.metric.ci95,
                marks.get(j, "set aside" if p.set_aside else ""),
            )
            for j, p in enumerate(s.points)
        ]
        section.blocks.append(
            Chart(
                f"history-{i}",
                f"{s.benchmark} {s.workload} on {labels.get(s.fingerprint, s.fingerprint[:8])}",
                f"{s.metric} over {len(s.points)} runs; {len(s.regressions)} regressions flagged",
                partial(charts.draw_history, points=points, unit=s.points[-1].metric.unit),
                size=(7.0, 3.0),
            )
        )
    rows: list[list[str | Cell]] = []
    for s in ranked:
        last = s.points[-1].metric
        flag = Cell("")
        if s.unstable:
            flag = Cell(f"unstable: {s.unstable}", "warn")
        elif s.changes:
            c = s.changes[-1]
            flag = Cell(
                f"{c.kind} at run {s.points[c.index].run_id}: {c.ratio:.3g}x",
                "bad" if c.kind == "regression" else "good",
            )
        rows.append(
            [
                f"{s.benchmark} {s.workload}",
                labels.get(s.fingerprint, s.fingerprint[:8]),
                s.metric,
                str(len(s.points)),
                figure(last),
                flag,
                _set_aside(s),
            ]
        )
    section.blocks.append(
        Table(["workload", "system", "metric", "runs", "latest", "flag", "not judged"], rows, numeric=frozenset({3, 4}))
    )
    return section


def _set_aside(s: Series) -> Cell:
    """'2 of 7 runs: contended (2)', the reasons counted by kind."""
    kinds: dict[str, int] = {}
    for p in s.points:
        for why in dict.fromkeys(w.split(":")[0] for w in p.set_aside):
            kinds[why] = kinds.get(why, 0) + 1
    n = sum(1 for p in s.points if p.set_aside)
    if not n:
        return Cell("")
    return Cell(f"{n} of {len(s.points)} runs: " + ", ".join(f"{k} ({v})" for k, v in kinds.items()), "warn")


def _first(reasons: list[str], most: int = 6) -> list[str]:
    """The first ``most`` reasons, and how many more."""
    return reasons[:most] + ([f"and {len(reasons) - most} more"] if len(reasons) > most else [])
