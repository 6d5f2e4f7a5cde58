"""What a search found: the ranking, the winner, the command that reproduces it, and the summary record.

The winner is the best *confirmed* candidate that passed the accuracy gate (or is its FP32 reference) and
whose every confirmation LoadGen called VALID; a screening figure alone never wins, since a 2-second run
on a shared machine can be lucky. Every trial is referenced from the summary by its record id, so the
ranking can be checked against the stored runs.
"""

from __future__ import annotations

import shlex
import statistics
from dataclasses import MISSING, dataclass, fields
from typing import Any

from accelbench.kit import metrics as fig
from accelbench.measure.stats import Measurement
from accelbench.results.record import Metric, Result
from accelbench.tune.search import Search, Trial
from accelbench.tune.space import Candidate

NAME = "tune/search"
#: measurement-length fields of a trial: the reproduced run takes its family's own, longer, defaults
TRIAL_LENGTH = frozenset({"duration", "profile", "warmup", "num_batches", "display_every", "mode", "dataset"})


@dataclass
class Row:
    """One candidate in the ranking."""

    candidate: Candidate
    figure: float | None  # the confirmations' median, else the screening figure
    confirmations: list[float]
    screen: float | None
    accuracy: str
    valid: bool | None
    status: str  # winner, confirmed, screened, failed, gate failed, invalid

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.candidate.settings,
            "label": self.candidate.label(),
            "figure": self.figure,
            "confirmations": self.confirmations,
            "screen": self.screen,
            "accuracy": self.accuracy,
            "valid": self.valid,
            "status": self.status,
        }


def figure_of(search: Search) -> tuple[str, str, bool]:
    """(metric name, unit, higher is better) of the ranked figure: the confirmations', else the screenings'."""
    for phase in ("confirm", "screen"):
        for t in search.trials:
            if t.phase == phase and t.ok and t.result and t.result.primary:
                return t.result.primary_metric or "", t.result.primary.unit, t.result.primary.higher_is_better
    return "", "", True


def _accuracy(search: Search, c: Candidate) -> str:
    if search.params.task == "train":
        return "not gated (training throughput)"
    if search.is_reference(c):
        return "the FP32 reference"
    gate = search.gate_of(c)
    if gate is None:
        return "not gated"
    if not gate.ok or gate.result is None:
        return f"gate failed to run: {gate.why_not}"
    r = gate.result
    ratio = r.metrics.get("quality_ratio")
    what = f"{r.primary_metric} {r.primary.value:.4g}" if r.primary else "?"
    share = f" ({ratio.value:.2%} of FP32)" if ratio else ""
    verdict = {True: "passed", False: "FAILED", None: "no verdict"}[r.valid]
    return f"{verdict}: {what}{share}"


def ranking(search: Search) -> list[Row]:
    _, _, higher = figure_of(search)
    rows: list[Row] = []
    seen: set[str] = set()
    for t in search.trials:
        c = t.candidate
        if c.key in seen:
            continue
        seen.add(c.key)
        screens, confirms = search.of(c, "screen"), search.of(c, "confirm")
        values = [x.figure for x in confirms if x.figure is not None]
        screen = next((x.figure for x in screens if x.figure is not None), None)
        valid = _valid(confirms or screens)
        passed = search.passed_gate(c)
        failed = [x for x in screens + confirms if not x.ok]
        if failed and not values and screen is None:
            status = "failed: " + failed[0].why_not
        elif passed is False:
            status = "gate failed"
        elif values and valid is False:
            status = "invalid"
        elif values:
            status = "confirmed"
        else:
            status = "screened"
        figure = statistics.median(values) if values else screen
        rows.append(Row(c, figure, values, screen, _accuracy(search, c), valid, status))
    order = {"confirmed": 0, "screened": 1, "invalid": 2, "gate failed": 3}
    rows.sort(key=lambda r: (order.get(r.status, 4), _sort_value(r.figure, higher)))
    if rows and rows[0].status == "confirmed":
        rows[0].status = "winner"
    return rows


def _sort_value(value: float | None, higher: bool) -> float:
    if value is None:
        return float("inf")
    return -value if higher else value


def _valid(trials: list[Trial]) -> bool | None:
    verdicts = [t.result.valid for t in trials if t.ok and t.result is not None]
    if not verdicts or all(v is None for v in verdicts):
        return None
    return all(v is not False for v in verdicts)


def reproduce(search: Search, c: Candidate) -> str:
    """The one ordinary command that measures the winner at its family's full length."""
    p = search.params
    if p.task == "infer":
        extra = {"scenario": p.scenario} | ({"mode": "find-peak"} if p.scenario == "server" else {})
        trial = p.trial_params(**c.settings, **extra)
    else:
        trial = p.trial_params(**c.settings)
    words = ["accelbench", p.task, p.model]
    common = ("device", "threads")  # the common options last, as a person writes them
    for f in sorted(fields(trial), key=lambda f: f.name in common):
        if f.name == "model" or (f.name in TRIAL_LENGTH and not (f.name == "mode" and p.scenario == "server")):
            continue
        value, default = getattr(trial, f.name), f.default if f.default is not MISSING else None
        if value == default or value is None:
            continue
        flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + f.name.replace("_", "-"))
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def _confirmed_metric(values: list[float], unit: str, higher: bool) -> Metric:
    """The median of the confirmation runs; their interval where enough runs support one."""
    m = Measurement(tuple(values))
    return Metric(value=m.median, unit=unit, higher_is_better=higher, ci95=m.ci95, n=m.n, stats=m.summary())


def summary(search: Search) -> Result:
    """The search as one record: the winner's figure and speed-up, every trial, the ranking, the command."""
    name, unit, higher = figure_of(search)
    rows = ranking(search)
    winner = rows[0] if rows and rows[0].status == "winner" else None
    default = next((r for r in rows if r.candidate.key == search.default.key), None)
    details: dict[str, Any] = {
        "figure": name,
        "unit": unit,
        "higher_is_better": higher,
        "ranking": [r.to_dict() for r in rows],
        "trials": [_trial_dict(t) for t in search.trials],
        "left_out": [{"settings": c.settings, "label": c.label(), "reason": why} for c, why in search.left_out],
        "not_tried": [{"settings": c.settings, "label": c.label(), "reason": why} for c, why in search.not_tried],
        "stopped": search.stopped,
        "budget_seconds": search.params.budget_seconds,
        "elapsed_seconds": search.elapsed,
        "gate": _gate_words(search),
    }
    params = search.params.to_dict()
    if winner is None:
        why = "; ".join(search.stopped) or "no candidate was confirmed VALID and through the accuracy gate"
        return Result(NAME, params, status="failed", error=f"no winner: {why}", details=details)
    details["winner"] = winner.candidate.settings
    details["reproduce"] = reproduce(search, winner.candidate)
    metrics = {name: _confirmed_metric(winner.confirmations, unit, higher)}
    if default is not None and default.confirmations:
        base = statistics.median(default.confirmations)
        best = metrics[name].value
        ratio = best / base if higher else base / best
        metrics["speedup_over_default"] = fig.figure(ratio, "x the default settings", higher_is_better=True)
        details["default"] = {"settings": default.candidate.settings, "figure": base}
    return Result(NAME, params, metrics=metrics, primary_metric=name, valid=winner.valid, details=details)


def _gate_words(search: Search) -> str:
    p = search.params
    if p.task == "train":
        return "none: training throughput has no accuracy gate"
    against = f"the labels of {p.dataset}" if p.dataset else "the FP32 eager model's answers on the same samples"
    weights = f"checkpoint {p.checkpoint}" if p.checkpoint else "random weights (calibrated: near-tied answers)"
    return f"MLPerf's 99% gate against {against}, {weights}"


def _trial_dict(t: Trial) -> dict[str, Any]:
    r = t.result
    return {
        "phase": t.phase,
        "label": t.candidate.label(),
        "settings": t.candidate.settings,
        "seconds": round(t.seconds, 2),
        "result_id": r.id if r else None,
        "status": r.status if r else "failed",
        "figure": t.figure,
        "metric": r.primary_metric if r else None,
        "valid": r.valid if r else None,
        "why_not": None if t.ok else t.why_not,
    }
