"""What a submission tree holds: one result per (model, scenario), each with the performance, accuracy and audit
records that go into its folder, and the round, division and system type they are written for.

Everything that refuses the runs as a whole (different systems or rounds, a model MLPerf does not have, a system
type that does not hold a model, a closed tree without a scenario it needs, logs gone from disk) is decided here,
before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from accelbench.errors import UsageError
from accelbench.loadgen.mlcommons import ACCELBENCH, AUDITS, ROUNDS, SCENARIO_DIRS, Model, model_of, round_of
from accelbench.submission.runs import Source

#: the benchmarks whose records are LoadGen runs (image and other models; language models)
LOADGEN_BENCHMARKS = ("infer/loadgen", "infer/llm")
#: the modes whose record is a scenario's performance result (find-peak ends in a full run at the load it found)
PERFORMANCE_MODES = ("performance", "find-peak")
#: the system types in the order ``auto`` tries them: the narrowest category that holds every model
SYSTEM_TYPES = ("datacenter", "edge", "datacenter,edge")
DIVISIONS = ("open", "closed")


@dataclass
class Pick:
    """One result of the tree: a model in a scenario, and the records that go into its folder."""

    accelbench_model: str
    model: Model
    scenario: str  #: MLCommons' name (the folder's)
    performance: Source
    accuracy: Source | None = None
    #: the scenario of the accuracy record where it is another scenario's (none was made in this one)
    accuracy_from: str | None = None
    audits: dict[str, Source] = field(default_factory=dict)
    #: what went in, beyond the records themselves (a choice among several, a borrowed accuracy run)
    notes: list[str] = field(default_factory=list)


@dataclass
class Plan:
    round: str
    division: str
    system_type: str
    picks: list[Pick]
    #: what the plan decided that a reader should know (the round and system type chosen, records left out)
    notes: list[str] = field(default_factory=list)


def plan(
    sources: Sequence[Source],
    *,
    division: str = "open",
    system_type: str | None = None,
    round_name: str | None = None,
) -> Plan:
    """The results a tree holds, one per (model, scenario), from the runs' records; refuses (UsageError) runs of
    different systems or rounds, a model MLPerf does not have, a record whose LoadGen logs are gone and, in the
    closed division, a model without a scenario its system type requires."""
    if division not in DIVISIONS:
        raise UsageError(f"--division is one of {', '.join(DIVISIONS)}, not {division!r}")
    if round_name is not None and round_name not in ROUNDS:
        raise UsageError(f"--round is one of {', '.join(ROUNDS)}, not {round_name!r}")
    notes: list[str] = []
    usable = [s for s in sources if s.record.status == "ok" and s.record.benchmark in LOADGEN_BENCHMARKS]
    skipped = len(sources) - len(usable)
    if skipped:
        notes.append(f"{skipped} record(s) left out: not an ok LoadGen run (infer/loadgen, infer/llm)")
    lg = [s for s in usable if s.details.get("loadgen_log_dir") and s.scenario]
    if len(lg) < len(usable):
        notes.append(f"{len(usable) - len(lg)} record(s) left out: no LoadGen test (a closed loop or a sweep)")
    if not lg:
        raise UsageError("the runs hold no ok LoadGen record (accelbench infer MODEL --scenario ...) to submit")
    _same_system(lg)
    rnd = _round(lg, round_name, notes)
    models = _models(lg, rnd)
    stype = _system_type(models, system_type, rnd, notes)
    picks = _picks(lg, models, notes)
    _scenarios(picks, models, stype, division, rnd)
    return Plan(rnd, division, stype, picks, notes)


def _same_system(sources: Sequence[Source]) -> None:
    prints: dict[str, Source] = {}
    for s in sources:
        prints.setdefault(s.record.fingerprint, s)
    if len(prints) > 1:
        said = ", ".join(f"{fp or 'none'} (run {s.record.run_id})" for fp, s in prints.items())
        raise UsageError(
            f"the runs come from {len(prints)} systems (fingerprints {said}): a tree is one system's; "
            "write one tree per system"
        )


def _round(sources: Sequence[Source], given: str | None, notes: list[str]) -> str:
    """The round the runs' LoadGen seeds belong to: one for all, else refused; none (the quick profile's zero
    seeds): ``given``, else the latest round."""
    rounds: dict[str, Source] = {}
    for s in sources:
        d = s.details
        seeded = d.get("mlperf_round") if "mlperf_round" in d else round_of(s.detail())
        if seeded:
            rounds.setdefault(str(seeded), s)
    if len(rounds) > 1:
        said = ", ".join(f"{r} (run {s.record.run_id})" for r, s in rounds.items())
        raise UsageError(f"the runs were seeded for different MLPerf rounds: {said}; a tree is one round's")
    if rounds:
        (seeded_round,) = rounds
        if given is not None and given != seeded_round:
            run = rounds[seeded_round].record.run_id
            raise UsageError(
                f"--round {given}, but the runs' LoadGen seeds are {seeded_round}'s (run {run}): "
                f"LoadGen {seeded_round}'s checker is the one that accepts them; drop --round or pass {seeded_round}"
            )
        return seeded_round
    chosen = given or list(ROUNDS)[-1]
    notes.append(
        f"no run carries a round's LoadGen seeds (the quick profile sets 0): written for {chosen}"
        + ("" if given else " (the latest round accelbench knows; --round to choose)")
    )
    return chosen


def _models(sources: Sequence[Source], rnd: str) -> dict[str, Model]:
    """Each accelbench model the runs served, as the round's MLPerf model; refused where MLPerf has none."""
    out: dict[str, Model] = {}
    for s in sources:
        name = str(s.params.get("model"))
        if name in out:
            continue
        model = model_of(name, rnd)
        if model is None:
            known = ", ".join(
                f"{a} ({m})" for a, m in sorted(ACCELBENCH.items()) if m in ROUNDS[rnd].models
            )  # fmt: skip
            raise UsageError(
                f"{name} (run {s.record.run_id}) is not an MLPerf Inference {rnd} model; "
                f"the accelbench models that are: {known}"
            )
        out[name] = model
    return out


def _system_type(models: Mapping[str, Model], given: str | None, rnd: str, notes: list[str]) -> str:
    if given is not None:
        stype = given.replace(" ", "").lower()
        if stype == "edge,datacenter":
            stype = "datacenter,edge"
        if stype not in SYSTEM_TYPES:
            raise UsageError(f"--system-type is one of {', '.join(SYSTEM_TYPES)}, not {given!r}")
        for name, m in models.items():
            if stype not in m.required:
                holds = ", ".join(t for t in SYSTEM_TYPES if t in m.required)
                raise UsageError(
                    f"{m.name} ({name}) is not in MLPerf Inference {rnd}'s {stype} category (it is in: "
                    f"{holds}); pass --system-type {holds.split(', ')[-1]}"
                )
        return stype
    for stype in SYSTEM_TYPES:
        if all(stype in m.required for m in models.values()):
            notes.append(f"system type {stype}: the narrowest MLPerf category that holds every model (--system-type)")
            return stype
    raise UsageError(
        "no MLPerf system type holds all of "
        + ", ".join(f"{m.name} ({', '.join(t for t in SYSTEM_TYPES if t in m.required)})" for m in models.values())
        + ": write one tree per system type"
    )


def _latest(sources: list[Source]) -> tuple[Source, list[Source]]:
    ordered = sorted(sources, key=lambda s: s.record.started_at)
    return ordered[-1], ordered[:-1]


def _picks(sources: Sequence[Source], models: Mapping[str, Model], notes: list[str]) -> list[Pick]:
    groups: dict[tuple[str, str], list[Source]] = {}
    for s in sources:
        s.log_dir()  # refused here, before anything is written, where a record's logs are gone
        groups.setdefault((str(s.params.get("model")), s.scenario), []).append(s)
    picks: list[Pick] = []
    accuracy_of_model: dict[str, Source] = {}
    for (name, scenario), group in sorted(groups.items(), key=lambda kv: (kv[0][0], _scenario_order(kv[0][1]))):
        perf = [s for s in group if s.mode in PERFORMANCE_MODES and not s.audit]
        acc = [s for s in group if s.mode == "accuracy" and not s.audit]
        if acc:  # the one a scenario without its own borrows: Offline's, else the latest
            latest_acc, _ = _latest(acc)
            best = accuracy_of_model.get(name)
            rank = (latest_acc.scenario == "Offline", latest_acc.record.started_at)
            if best is None or rank > (best.scenario == "Offline", best.record.started_at):
                accuracy_of_model[name] = latest_acc
        if not perf:
            notes.append(f"{name} {scenario}: no performance record, so no result (its other records left out)")
            continue
        chosen, earlier = _latest(perf)
        pick = Pick(name, models[name], scenario, chosen)
        if earlier:
            pick.notes.append(
                f"the latest of {len(perf)} performance records ({chosen.short}); left out: "
                + ", ".join(e.short for e in earlier)
            )
        if acc:
            pick.accuracy, left = _latest(acc)
            if left:
                pick.notes.append(f"the latest of {len(acc)} accuracy records ({pick.accuracy.short})")
        for test in AUDITS:
            runs = [s for s in group if s.audit == test]
            if runs:
                pick.audits[test], left = _latest(runs)
                if left:
                    pick.notes.append(f"{test}: the latest of {len(runs)} audit records ({pick.audits[test].short})")
        picks.append(pick)
    for pick in picks:
        if pick.accuracy is None and pick.accelbench_model in accuracy_of_model:
            pick.accuracy = accuracy_of_model[pick.accelbench_model]
            pick.accuracy_from = pick.accuracy.scenario
            pick.notes.append(
                f"no accuracy run in {pick.scenario}: its accuracy folder holds the {pick.accuracy_from} one's "
                f"({pick.accuracy.short})"
            )
    if not picks:
        raise UsageError("the runs hold no LoadGen performance record (--mode performance) to submit")
    return picks


def _scenario_order(scenario: str) -> int:
    order = list(SCENARIO_DIRS.values())
    return order.index(scenario) if scenario in order else len(order)


def needed(model: Model, stype: str, have: set[str]) -> list[str]:
    """The scenarios ``model`` still needs on a ``stype`` system, given those it ``have``s."""
    missing = [s for s in model.needs(stype) if s not in have]
    optional = model.optional.get(stype, ())
    if optional and not have & set(optional):
        missing.append(f"one of {' or '.join(optional)}")
    return missing


def _scenarios(picks: Sequence[Pick], models: Mapping[str, Model], stype: str, division: str, rnd: str) -> None:
    if division != "closed":
        return
    for name, model in models.items():
        have = {p.scenario for p in picks if p.accelbench_model == name}
        missing = needed(model, stype, have)
        if missing:
            raise UsageError(
                f"{model.name} ({name}) on a system of type {stype} needs {', '.join(model.needs(stype))} in MLPerf "
                f"Inference {rnd}'s closed division; missing {', '.join(missing)}: run accelbench infer {name} "
                "--scenario ... for it, or write the open division"
            )
        allowed = set(model.needs(stype)) | set(model.optional.get(stype, ()))
        extra = sorted(have - allowed)
        if extra:
            raise UsageError(
                f"{model.name} ({name}) has no {', '.join(extra)} result in the closed division on a system of type "
                f"{stype} (it takes {', '.join(sorted(allowed))}): leave that run out"
            )
