"""What a search found: the ranking, the winner, the command that reproduces it, and the summary record.

The winner is the best *confirmed* candidate that passed the accuracy gate, every confirmation VALID, separated
from every other such candidate across the interleaved confirmations (:mod:`accelbench.tune.verdict`); a
screening figure alone never wins, and candidates not separated are named equivalent. Every trial is referenced by
its record id, so the ranking can be checked against the stored runs."""

from __future__ import annotations

import re
import shlex
import statistics
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast

from accelbench.families import benchmark_of
from accelbench.kit import metrics as fig
from accelbench.measure.stats import Measurement
from accelbench.results import format as fmt
from accelbench.results.details import Details, fidelity_of
from accelbench.results.record import Metric, Result
from accelbench.tune.candidate import Candidate
from accelbench.tune.trials import Search, Trial
from accelbench.tune.verdict import Decision, apart, decide, figure_of, median_of

#: what a search found (:func:`summary` says each)
Outcome = Literal["winner", "equivalent", "no search", "not confirmed", "no better", "no winner"]
#: outcomes that name no best and are no failure either (exit 0, a skipped record whose reason says what to do)
NO_CLAIM: tuple[Outcome, ...] = ("no search", "not confirmed", "no better")


class RankedRow(TypedDict, total=False):
    """One candidate of the ranking as the record keeps it (:meth:`Row.to_dict` writes every key; a stored record
    of an older accelbench may lack one)."""

    settings: dict[str, Any]
    label: str
    figure: float | None
    confirmations: list[float]
    screen: float | None
    accuracy: str
    valid: bool | None
    status: str


class TrialRow(TypedDict, total=False):
    """One run of the search: its phase, the candidate, how long it took and the id of its stored record (every
    key written; a stored record of an older accelbench may lack one)."""

    phase: str
    label: str
    settings: dict[str, Any]
    seconds: float
    result_id: str | None
    status: str
    figure: float | None
    metric: str | None
    valid: bool | None
    why_not: str | None


class Named(TypedDict, total=False):
    """A candidate the search left out or never tried, and why; or one of the equivalent best, and its command."""

    settings: dict[str, Any]
    label: str
    reason: str
    reproduce: str


class DefaultFigure(TypedDict, total=False):
    """The default settings' confirmed figure a winner's speed-up is over, and the evidence that separates them."""

    settings: dict[str, Any]
    figure: float | None
    evidence: str


class TuneDetails(Details, total=False):
    """A search's summary record: what was ranked and by what figure, every trial, the outcome and the words that
    state it, the command(s) that reproduce it. The report's tuning section and ``accelbench tune``'s exit status
    read it (:func:`details_of`)."""

    figure: str
    unit: str
    higher_is_better: bool
    ranking: list[RankedRow]
    trials: list[TrialRow]
    left_out: list[Named]
    not_tried: list[Named]
    stopped: list[str]
    budget_seconds: float
    elapsed_seconds: float
    figure_words: str
    gate: str
    accuracy: str | None
    outcome: Outcome
    verdict: str
    equivalent: list[Named]
    winner: dict[str, Any]
    reproduce: str
    speedup_withheld: str
    default: DefaultFigure
    headline: str


def details_of(record: Result) -> TuneDetails:
    """A search's summary record's details as :func:`summary` wrote them (the same dict)."""
    return cast(TuneDetails, record.details)
#: why no speed-up is stated where the default settings won
_DEFAULT_BEST = "the default settings are the best"
#: measurement-length fields of a trial: the reproduced command keeps the confirmation's, after the settings
TRIAL_LENGTH = frozenset({"duration", "profile", "warmup", "num_batches", "display_every"})


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

    def to_dict(self) -> RankedRow:
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


def _accuracy(search: Search, c: Candidate) -> str:
    if not search.task.gated:
        return search.task.ungated_words()
    if search.is_reference(c):
        return "the FP32 reference"
    gate = search.gate_of(c)
    if gate is None:
        return "not gated"
    if not gate.ok or gate.result is None:
        return f"gate failed to run: {gate.why_not}"
    r = gate.result
    verdict = {True: "passed", False: "FAILED", None: "no verdict"}[r.valid]
    fidelity = fidelity_of(r)
    if fidelity:  # a rounding precision without labels: how far it strayed, in units of its own rounding
        return f"{verdict}: fidelity {fidelity['ratio']:.2f}x {fidelity['precision']} rounding"
    ratio = r.metrics.get("quality_ratio")
    what = f"{r.primary_metric} {r.primary.value:.4g}" if r.primary else "?"
    share = f" ({ratio.value:.2%} of FP32)" if ratio else ""
    return f"{verdict}: {what}{share}"


def ranking(search: Search) -> list[Row]:
    """Every candidate tried: contenders first by their confirmations' median, then the screened, the invalid,
    the gate failures and the failed. The best is the winner only where it separated from every other
    contender; otherwise the best and those it did not separate from are all ``equivalent``."""
    _, _, higher = figure_of(search)
    decision = decide(search)
    contenders = {c.key for c in decision.ranked}
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
        failed = [x for x in screens + confirms if not x.ok]
        if failed and not values and screen is None:
            status = "failed: " + failed[0].why_not
        elif search.passed_gate(c) is False:
            status = "gate failed"
        elif values and valid is False:
            status = "invalid"
        elif values and c.key not in contenders and any(not x.ok for x in confirms):
            status = "failed in confirmation: " + next(x.why_not for x in confirms if not x.ok)
        elif values:
            status = "confirmed"
        else:
            status = "screened"
        figure = statistics.median(values) if values else screen
        rows.append(Row(c, figure, values, screen, _accuracy(search, c), valid, status))
    order = {"confirmed": 0, "screened": 1, "invalid": 2, "gate failed": 3}
    rows.sort(key=lambda r: (order.get(r.status, 4), _sort_value(r.figure, higher)))
    if search.no_search is None and decision.top is not None and not _default_alone(search, decision):
        best = {c.key for c in decision.equivalent}
        for r in rows:
            if r.candidate.key in best:
                r.status = "winner" if len(best) == 1 else "equivalent"
    return rows


def _default_alone(search: Search, decision: Decision) -> bool:
    """Whether the default settings are the only contender: confirmed as the baseline, beside nothing that came
    through (every finalist failed its gate, crashed or ran INVALID, or none fitted). Nothing was beaten, so it is
    no winner: no setting was confirmed better than it."""
    return len(decision.ranked) == 1 and decision.ranked[0].key == search.default.key


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
    """The one ordinary command that measures ``c`` as its confirmations did: its settings and the confirmation
    trial's length (``--duration 6``, ``--num-batches 18``, Server's ``--mode find-peak``), so the command gives the
    figure the search ranked; a longer run is the command without its length flags."""
    task = search.task
    trial = task.trial_of("confirm", dict(c.settings))
    words = ["accelbench", task.command, search.params.model]
    common = ("device", "threads")  # the common options last, as a person writes them
    plain = type(trial).of(model=search.params.model)  # the defaults as the model resolves them (optimizer: auto)
    values, defaults = trial.to_dict(), plain.to_dict()  # a backend's own settings among the run's
    own = list(type(trial).__dict__.get("__annotations__", {}))  # its own flags in the order it declares them

    def order(f: Any) -> tuple[bool, bool, bool, int]:
        length = f.name in TRIAL_LENGTH  # the length after the settings: what a longer run drops
        return f.name in common, length, f.name in own, own.index(f.name) if f.name in own else 0

    for f in sorted((f for f, _ in type(trial).flags()), key=order):
        if f.name == "model":
            continue
        value, default = values.get(f.name), defaults.get(f.name, f.default)
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
    """The search as one record: its outcome, every trial, the ranking, the command(s), and its one-line
    ``headline`` (:func:`headline`), which a reader sees first.

    ``details["outcome"]`` is ``winner``, ``equivalent`` (the top few not separated), ``no search`` (under two
    candidates screened: skipped), ``not confirmed`` (better screenings never confirmed), ``no better`` (the default
    confirmed alone) or ``no winner`` (nothing VALID: failed). A speed-up is stated only against a default confirmed
    VALID more than once and separated from the winner; else ``speedup_withheld`` says why."""
    record = _summary(search)
    details_of(record)["headline"] = headline(record)
    return record


def _summary(search: Search) -> Result:
    name, unit, higher = figure_of(search)
    rows = ranking(search)
    decision = decide(search)
    details: TuneDetails = {
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
        "figure_words": metric_words(search.task.name, name, unit),
        "gate": search.task.gate_words(),
        "accuracy": search.task.accuracy_words(),
    }
    params = search.params.to_dict()
    bench = benchmark_of(search.params)  # the registry's name of a search
    if search.no_search is not None:
        details["outcome"] = "no search"
        return Result(bench, params, status="skipped", reason=search.no_search, details=details)
    top = decision.top
    if top is None:
        details["outcome"] = "no winner"
        why = "; ".join(search.stopped) or "no candidate was confirmed VALID and through the accuracy gate"
        return Result.failed(bench, params, f"no winner: {why}", details=details)
    row = next(r for r in rows if r.candidate.key == top.key)
    metrics = {name: _confirmed_metric(row.confirmations, unit, higher)}
    if decision.open:
        group = decision.equivalent
        details["outcome"] = "equivalent"
        details["verdict"] = (
            f"not separated: the top {len(group)} are equivalent "
            f"({decision.evidence[decision.open[0].key]} for the first two)"
        )
        details["equivalent"] = [
            {"settings": c.settings, "label": c.label(), "reproduce": reproduce(search, c)} for c in group
        ]
        return Result(bench, params, metrics=metrics, primary_metric=name, valid=row.valid, details=details)
    runner_up = decision.ranked[1] if len(decision.ranked) > 1 else None
    if runner_up is None:
        unconfirmed = _screened_better(rows, row, higher)
        if unconfirmed:  # the "best" only because the budget confirmed nothing else: no claim
            details["outcome"] = "not confirmed"
            best = unconfirmed[0]
            cut = f" ({search.stopped[-1]})" if search.stopped else ""
            why = (
                f"not confirmed: {len(unconfirmed)} candidate(s) screened better than {top.label()}, the only one "
                f"confirmed (fastest screened: {best.candidate.label()} at {best.screen:.4g} {unit} against "
                f"{row.screen or row.figure:.4g}), were never gated and confirmed{cut}: raise --budget (this "
                f"search took {search.elapsed:.0f} s of {search.params.budget_seconds:.0f} s)"
            )
            return Result(bench, params, status="skipped", reason=why, details=details)
        if _default_alone(search, decision):
            details["outcome"] = "no better"
            others = _none_better(rows, top)
            why = f"no setting was confirmed better than the default settings ({top.label()}): {others}"
            return Result(bench, params, status="skipped", reason=why, details=details)
    details["outcome"] = "winner"
    details["winner"] = top.settings
    details["reproduce"] = reproduce(search, top)
    details["verdict"] = (
        f"separated from the runner-up, {runner_up.label()}: {decision.evidence[runner_up.key]}"
        if runner_up
        else _alone(rows)
    )
    ratio, words = _speedup(search, top, metrics[name].value, higher)
    if ratio is None:
        details["speedup_withheld"] = words
    else:
        metrics["speedup_over_default"] = fig.figure(ratio, "x the default settings", higher_is_better=True)
        default = search.default
        details["default"] = {"settings": default.settings, "figure": median_of(search, default), "evidence": words}
    return Result(bench, params, metrics=metrics, primary_metric=name, valid=row.valid, details=details)


def headline(record: Result) -> str:
    """The search's outcome in one line, the first a reader sees: what won, by how much over the default settings
    and on what evidence; or that the best few are equivalent; or why nothing is named (nothing was confirmed
    better than the default, nothing was compared, what screened better was never confirmed)."""
    d = details_of(record)
    outcome = d.get("outcome")
    if outcome in NO_CLAIM:
        return record.reason or str(outcome)
    if record.status != "ok" or record.primary is None:
        return record.error or "no winner"
    model = str(record.params.get("model", ""))
    if outcome == "equivalent":
        return f"{d['verdict']}: " + "; ".join(f"{model} {e['label']}" for e in d.get("equivalent", []))
    m = record.primary
    figure = f"{fmt.number(m.value)} {m.unit}".strip()
    label = Candidate(d["winner"]).label()
    speed = record.metrics.get("speedup_over_default")
    if speed is not None:
        base = d["default"]["figure"]
        against = f" against {fmt.number(base)}" if isinstance(base, (int, float)) else ""
        return (
            f"best: {model} {label}, {speed.value:.2f}x the default settings ({figure}{against}; "
            f"{d['default']['evidence']})"
        )
    if d.get("speedup_withheld") == _DEFAULT_BEST:
        return f"the default settings are the best: {model} {label}, {figure}; {d['verdict']}"
    return f"best: {model} {label}, {figure}; {d.get('speedup_withheld') or d['verdict']}"


def metric_words(benchmark: str, name: str, unit: str) -> str:
    """How the ranked figure reads in a title: its label in its family's metric table (the label's figure read as
    its unit), else its unit where that says what is counted (``output tokens/s``, ``samples/s``), else its name in
    words with its unit (``latency p90 (s)``): never the record's key."""
    from accelbench.families import Label, family_of

    family = family_of(benchmark)
    spec = family.metrics.get(name) if family is not None else None
    text = spec.text if isinstance(spec, Label) else spec
    if isinstance(text, str):
        words = re.sub(r"\{value[^}]*\}", "", text.replace("{metric}", unit).replace("{est}", "").replace("{stem}", ""))
        if words.strip():
            return " ".join(words.split())
    if "/" in unit:
        return unit
    words = name.removesuffix("_seconds").replace("_", " ")
    return f"{words} ({unit})" if unit else words


def _alone(rows: list[Row]) -> str:
    """The verdict of a best with no runner-up confirmed beside it: what the others were, so "best" is not read
    as beating candidates that were only screened (each on one short run)."""
    screened = sum(r.status == "screened" for r in rows)
    rest = (
        f"; {screened} other candidate(s) screened lower and were never confirmed, so it is best of what was "
        "screened, not separated from them"
        if screened
        else ""
    )
    return f"the only candidate confirmed VALID (and through the gate) in its round{rest}"


def _none_better(rows: list[Row], default: Candidate) -> str:
    """What became of the other candidates, where the default was confirmed alone: each kind once, a few named."""
    kinds = (
        ("failed the accuracy gate", "gate failed"),
        ("ran INVALID", "invalid"),
        ("failed", "failed"),  # "failed: why", "failed in confirmation: why"
        ("screened only, lower than the default or cut by the budget", "screened"),
    )
    others = [r for r in rows if r.candidate.key != default.key]
    said = []
    for words, status in kinds:
        some = [r.candidate.label() for r in others if _kind(r.status) == status]
        if some:
            named = ", ".join(some[:3]) + (f" and {len(some) - 3} more" if len(some) > 3 else "")
            said.append(f"{len(some)} {words} ({named})")
    return "; ".join(said) or "no other candidate was tried"


def _kind(status: str) -> str:
    """A ranking row's status without its reason ("failed: killed ..." and "failed in confirmation: ..." fail)."""
    return status.split(":")[0].removesuffix(" in confirmation")


def _screened_better(rows: list[Row], winner: Row, higher: bool) -> list[Row]:
    """Candidates only screened (never gated or confirmed) whose screening beat the winner's: best first."""
    own = winner.screen if winner.screen is not None else winner.figure
    if own is None:
        return []
    better = [
        r
        for r in rows
        if r.status == "screened" and r.screen is not None and (r.screen > own if higher else r.screen < own)
    ]
    return sorted(better, key=lambda r: _sort_value(r.screen, higher))


def _speedup(search: Search, winner: Candidate, best: float, higher: bool) -> tuple[float | None, str]:
    """The winner over the default settings, or None and why no ratio is stated.

    A ratio needs a baseline that is a measurement of the default: confirmed beside the winner, VALID every
    time (an INVALID run measured something other than the scenario asked for), more than once (one run
    says nothing of the variation between runs) and separated from the winner (else the ratio is noise)."""
    default = search.default
    if winner.key == default.key:
        return None, _DEFAULT_BEST
    confirms = search.of(default, "confirm")
    if not confirms:
        return None, "no speed-up: the default settings were not confirmed beside the winner"
    invalid = [t for t in confirms if t.ok and t.result is not None and t.result.valid is False]
    if invalid:
        r = invalid[0].result
        why = f" ({r.reason})" if r is not None and r.reason else ""
        return None, f"no speed-up: the default's confirmation was INVALID{why}, so there is no baseline"
    values = [t.figure for t in confirms if t.figure is not None]
    if len(values) < 2:
        return None, (
            f"no speed-up: the default settings were confirmed {len(values)} time(s); "
            "a single run says nothing of the variation between runs"
        )
    verdict = apart(search, winner, default)
    if not verdict.separated:
        return None, f"no speed-up: the winner and the default are not separated ({verdict.evidence})"
    base = statistics.median(values)
    return (best / base if higher else base / best), verdict.evidence


def _trial_dict(t: Trial) -> TrialRow:
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
