"""When a LoadGen run disagrees with the probe that planned it: rerun at the measured rate, or say the true cause.

A probe disturbed by another process plans too few queries and the run ends before its minimum duration,
INVALID for no fault of the user's. So a run that ran out of queries under a plan of the probe's (never one a
flag gave) is rerun from its own measurement, at most ``MAX_RERUNS`` times; a run still INVALID after that
names the true cause: the system's speed changed between runs (docs/infer.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.loadgen.logs import LATENCY_BOUND, MIN_DURATION
from accelbench.loadgen.params import LoadGenParams
from accelbench.loadgen.settings import MAX_PLANNED_RATE, Probe

#: runs after the first that a disagreement may cost; each is planned from the latest run's measurement
MAX_RERUNS = 2
#: Server: a run that completed less than this fraction of its schedule was overloaded (its target too high)
OVERLOADED = 0.9
#: Server: a run that completed less than this fraction of what the probes before and after it both measured
#: was disturbed (the system's speed changed during the run), not a measure of the system's capacity
DISTURBED = 0.25


#: Offline: a VALID run that measured under this fraction of its probe's rate was disturbed, not a measure of the
#: system (a shared 2-core host: Offline 452.7 output tokens/s after a probe of 3,952, and 3,244 with one thread)
BELOW_PROBE = 0.5


@dataclass(frozen=True)
class Disagreement:
    """A run whose plan was wrong: what it measured, as a probe, and the words the record keeps."""

    measured: Probe
    why: str
    #: a Server run sent more than it could complete (its target was too high), as against one that ran out of
    #: planned queries
    overloaded: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"why": self.why, "measured": self.measured.to_dict(), "overloaded": self.overloaded}


def planned_by_probe(params: LoadGenParams) -> bool:
    """Whether LoadGen's hint for this scenario came from the probe (a user's flag is the user's plan)."""
    return {
        "offline": not params.expected_qps,
        "server": not params.target_qps,
        "interactive": not params.target_qps,  # a language model's Server run under tighter limits
        "singlestream": True,
        "multistream": True,
    }[params.scenario]


def ran_seconds(d: dict[str, Any], scenario: str, samples: int) -> float | None:
    """How long the run lasted by LoadGen's own figures (None where it does not say)."""
    if scenario == "offline":
        rate = d.get("result_samples_per_second") or 0.0
        return samples / rate if rate else None
    if scenario in ("server", "interactive"):
        rate = d.get("result_completed_samples_per_sec") or 0.0
        return samples / rate if rate else None
    mean = d.get("result_mean_latency_ns") or 0.0
    spq = int(d.get("effective_samples_per_query") or 1)
    return (samples / max(spq, 1)) * mean / 1e9 if mean else None


def disagreement(d: dict[str, Any], params: LoadGenParams, probe: Probe, samples: int) -> Disagreement | None:
    """What the run measured, if it disagrees with the probe badly enough to be INVALID for it; else None."""
    if d.get("result_validity") == "VALID" or not planned_by_probe(params):
        return None
    scenario = params.scenario
    if scenario in ("server", "interactive"):
        scheduled = float(d.get("result_scheduled_samples_per_sec") or 0.0)
        completed = float(d.get("result_completed_samples_per_sec") or 0.0)
        if d.get("result_perf_constraints_met") is not False or not completed or completed >= OVERLOADED * scheduled:
            return None  # a latency miss at a rate the system kept up with is the verdict, not a wrong plan
        why = (
            f"the probe's {probe.rate:,.1f} samples/s set a target of {scheduled:,.1f} QPS, but the system completed "
            f"only {completed:,.1f} QPS: overloaded"
        )
        return Disagreement(Probe(min(completed, MAX_PLANNED_RATE), probe.single), why, overloaded=True)
    if d.get("result_min_duration_met") is not False:
        return None
    lasted = ran_seconds(d, scenario, samples)
    wanted = (d.get("effective_min_duration_ms") or 0) / 1000
    took = f" (the run lasted {lasted:.2g} s of its {wanted:g} s minimum)" if lasted is not None and wanted else ""
    if scenario == "offline":
        rate = float(d.get("result_samples_per_second") or 0.0)
        if not rate:
            return None
        why = f"the probe planned {probe.rate:,.1f} samples/s, the run measured {rate:,.1f}{took}"
        return Disagreement(Probe(min(rate, MAX_PLANNED_RATE), probe.single), why)
    mean = float(d.get("result_mean_latency_ns") or 0.0) / 1e9
    if not mean:
        return None
    if scenario == "singlestream":
        why = f"the probe planned {probe.single * 1e3:.3g} ms a query, the run measured {mean * 1e3:.3g} ms{took}"
        return Disagreement(Probe(probe.rate, mean), why)
    spq = int(d.get("effective_samples_per_query") or params.query_samples)
    planned = spq / probe.rate
    why = f"the probe planned {planned * 1e3:.3g} ms a query, the run measured {mean * 1e3:.3g} ms{took}"
    return Disagreement(Probe(min(spq / mean, MAX_PLANNED_RATE), probe.single), why)


def below_probe(d: dict[str, Any], params: LoadGenParams, probe: Probe) -> Disagreement | None:
    """An Offline run LoadGen called VALID that measured far under its probe: it is rerun like a run that
    disagreed with its plan, and, still under its repeated probe after the reruns, INVALID with that cause."""
    if params.scenario != "offline" or d.get("result_validity") != "VALID" or not probe.rate:
        return None
    rate = float(d.get("result_samples_per_second") or 0.0)
    if not rate or rate >= BELOW_PROBE * probe.rate:
        return None
    why = (
        f"the run measured {rate:,.2f} samples/s, under {BELOW_PROBE:.0%} of the {probe.rate:,.2f} its probe "
        "measured: the system's speed changed during the run"
    )
    return Disagreement(Probe(rate, probe.single), why)


def rerun(
    wrong: Disagreement, plan: Probe, repeated: Probe, log_dir: Any, conditions: dict[str, Any]
) -> dict[str, Any]:
    """What a record keeps of a run that disagreed with its plan: why, the probe that planned it and the repeated
    one, its logs (moved into ``discarded/`` beside the reported run's, so that no reader takes them for the
    result), and its contention (the conditions' warning, or None), which :func:`replanned` reads."""
    busy = next((c["text"] for c in contention(conditions)), None)
    return wrong.to_dict() | {
        "probe": plan.to_dict(),
        "probe_repeated": repeated.to_dict(),
        "log_dir": str(discard(Path(log_dir))),
        "contended": busy,
    }


#: the folder, beside the reported runs' logs, that a rerun's discarded logs move into
DISCARDED = "discarded"


def discard(log_dir: Path) -> Path:
    """Move a discarded run's LoadGen logs into ``discarded/`` of its parent; the new path (the same path where
    there is no folder to move)."""
    if not log_dir.is_dir():
        return log_dir
    target = log_dir.parent / DISCARDED / log_dir.name
    target.parent.mkdir(exist_ok=True)
    log_dir.rename(target)
    (target / "DISCARDED.txt").write_text(
        "accelbench discarded this LoadGen run: it disagreed with its plan and was rerun; the record's "
        "details.reruns says why. It is not the reported result.\n",
        encoding="utf-8",
    )
    return target


def replanned(first: Probe, measured: Probe, again: Probe, scenario: str, contended: bool = False) -> Probe:
    """The hints for a rerun: of the run's measurement and the repeated probe, the faster for Offline and
    MultiStream (too low runs out of queries again), the shorter latency for SingleStream, the slower for Server
    (too high overloads again); but a Server run that measured nothing of the system (``contended``, or under
    ``DISTURBED`` of both probes) is replanned from the repeated probe, so its VALID figure is not a fraction of
    what the system serves."""
    if scenario in ("server", "interactive"):
        disturbed = contended or measured.rate < DISTURBED * min(first.rate, again.rate)
        return Probe(again.rate if disturbed else min(measured.rate, again.rate), first.single)
    if scenario == "singlestream":
        return Probe(first.rate, min(measured.single, again.single))
    return Probe(max(measured.rate, again.rate), first.single)


def true_cause(reasons: list[tuple[str, str]], reruns: list[dict[str, Any]], conditions: dict[str, Any]) -> list[str]:
    """INVALID reasons ((rule, words): :func:`accelbench.loadgen.logs.invalid_rules`) in words: after reruns, the
    hint LoadGen's rule suggests ("raise --expected-qps") replaced by what happened (the speed changed between
    runs, with the conditions' warnings); without reruns, a contended run's reasons say the contention may be
    the cause."""
    if not reruns:
        if contention(conditions):
            # the fix LoadGen's rule suggests (run longer, lower the load) may not be the cause: other load was
            return [f"{r} (but the run was contended, which alone can break these rules: rerun on a quiet machine "
                    "before changing a setting)" for _, r in reasons]  # fmt: skip
        return [r for _, r in reasons]
    load = "; ".join(w for w in conditions.get("warnings", []) if w) or "nothing else was seen running"
    cause = (
        f"the system's speed changed from one run to the next: {len(reruns)} rerun(s) planned from the previous "
        f"run's own measurement still ran out of queries ({reruns[-1]['why']}); conditions: {load}"
    )
    out = []
    for rule, r in reasons:
        if rule == MIN_DURATION:
            out.append(f"min duration not met: {cause}")
        elif rule == LATENCY_BOUND and reruns[-1].get("overloaded"):
            out.append(f"{r} ({cause})")
        else:
            out.append(r)
    return out


def contention(conditions: dict[str, Any]) -> list[dict[str, Any]]:
    """The conditions' concerns of kind "contended" (serialised concerns: the conditions are a plain dict)."""
    return [c for c in conditions.get("concerns") or [] if c.get("kind") == "contended" and c.get("text")]


def rerun_warning(reruns: list[dict[str, Any]]) -> str:
    """The warning a reported run carries when earlier runs disagreed with their plans."""
    busy = [i + 1 for i, r in enumerate(reruns) if r.get("contended")]
    said = (
        f"; run(s) {', '.join(map(str, busy))} contended: the run after each was planned from a repeated probe instead"
        if busy
        else ""
    )
    return (
        f"rerun: the first run disagreed with its plan ({reruns[0]['why']}); reported: run {len(reruns) + 1}, "
        f"planned from the previous run's own measurement{said}"
    )
