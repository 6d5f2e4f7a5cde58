"""An MLCommons MLPerf Inference submission tree from stored accelbench runs: LoadGen's own logs in the folders and
under the names MLCommons' submission checker reads (docs/mlperf-rules.md §5), with the files a person writes by
hand made from what the records say, and nothing they do not say.

A tree is not a claim: each result says first whether it is for submission, and if not, why (the quick profile, a
cut duration, seeds of no round, an accuracy that was agreement with FP32 on synthetic samples), and what the
closed division would still need. An accuracy.txt carries MLPerf's metric only where the record measured it on the
benchmark's data set; otherwise it says in words what was measured, so that the checker reports the gap.

The parts, each its own module: runs.py reads the records, plan.py chooses what goes in (and refuses what cannot),
accuracy.py and audits.py write a result's accuracy and compliance folders, describe.py the files a person would
write by hand, output.py how any text reaches the tree. This module wires them: it writes each result's folder,
judges whether it is for submission, and says so in its README and the command's summary.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from accelbench import __version__
from accelbench.errors import UsageError
from accelbench.loadgen.mlcommons import round_of
from accelbench.submission import system_rules, systems
from accelbench.submission.accuracy import write_accuracy
from accelbench.submission.audits import write_audits
from accelbench.submission.describe import command_of, measurements, user_conf, weights_of, write_calibration, write_src
from accelbench.submission.output import PERF_FILES, copy_logs, redact, write_text
from accelbench.submission.plan import Pick, Plan, needed
from accelbench.submission.runs import Source, record_reasons

#: the release statuses a system may have (its description's "status")
STATUSES = ("available", "preview", "rdi")
#: the headline each scenario is judged by, from the detail log (RESULT_FIELD_NEW, and the language models')
HEADLINE = {
    "Offline": ("result_samples_per_second", 1.0, "samples/s"),
    "Server": ("result_completed_samples_per_sec", 1.0, "queries/s"),
    "Interactive": ("result_completed_samples_per_sec", 1.0, "queries/s"),
    "SingleStream": ("early_stopping_latency_ss", 1e6, "ms"),
    "MultiStream": ("early_stopping_latency_ms", 1e6, "ms"),
}
TOKEN_HEADLINE = {
    "Offline": ("result_tokens_per_second", 1.0, "tokens/s"),
    "Server": ("result_completed_tokens_per_second", 1.0, "tokens/s"),
    "Interactive": ("result_completed_tokens_per_second", 1.0, "tokens/s"),
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass
class Written:
    """What the tree says of one result: where it is, its headline, whether it is for submission."""

    pick: Pick
    folder: Path
    headline: str
    #: why the result is not for submission in its division (empty: nothing the records show stops it)
    not_for_submission: list[str]
    #: what the closed division would still need (empty where the tree is closed and has it all)
    closed_needs: list[str]
    concerns: list[str]


@dataclass(frozen=True)
class Identity:
    """Who submits what: the names the tree's folders and its system description carry (the division is the
    plan's)."""

    org: str
    system: str
    status: str = "available"
    system_toml: Path | None = None


def check_names(ident: Identity) -> None:
    """Refuses (UsageError) an --org or --system MLCommons' folders cannot take, or a status it does not know."""
    for what, value in (("--org", ident.org), ("--system", ident.system)):
        if not _NAME.match(value):
            raise UsageError(
                f"{what} {value!r}: MLCommons' folders take letters, digits, '_', '.' and '-', "
                "starting with a letter or digit"
            )
    if ident.status not in STATUSES:
        raise UsageError(f"--status is one of {', '.join(STATUSES)}, not {ident.status!r}")


def write(plan_: Plan, out: Path, ident: Identity) -> list[Written]:
    """Write the tree under ``out/<division>/<org>/`` and say what each result is; refused before anything is
    written where the names, the system description or the folder would not do."""
    check_names(ident)
    desc = system_description(plan_, ident)
    root = out / plan_.division / ident.org
    results = root / "results" / ident.system
    if results.exists():
        raise UsageError(f"{redact(str(results))} exists: remove it or write to another -o folder")
    written: list[Written] = []
    for pick in plan_.picks:
        written.append(_write_result(pick, results / pick.model.name / pick.scenario, plan_, ident))
    write_src(root, plan_)
    write_calibration(root, plan_)
    write_text(root / "systems" / f"{ident.system}.json", json.dumps(desc, indent=2) + "\n")
    return written


def _write_result(pick: Pick, folder: Path, plan_: Plan, ident: Identity) -> Written:
    perf = pick.performance
    perf_dir = perf.log_dir()
    detail = perf.detail()
    copy_logs(perf_dir, folder / "performance" / "run_1", PERF_FILES)
    blocking, concerns = record_reasons(perf)
    needs: list[str] = []

    def unless_said(words: str, text: str) -> None:  # the record's own rules may say it already
        if not any(words in b for b in blocking):
            blocking.append(text)

    if round_of(detail) != plan_.round:
        unless_said("seeds", f"LoadGen's seeds are not {plan_.round}'s (the official profile loads mlperf.conf's)")
    if detail.get("result_validity") != "VALID":
        unless_said("INVALID", f"LoadGen's result is {detail.get('result_validity') or 'not logged'}, not VALID")
    psc = detail.get("effective_performance_sample_count")
    if isinstance(psc, int) and psc < pick.model.performance_samples:
        unless_said(
            "performance sample count",
            f"its performance sample count was {psc} where MLPerf asks at least {pick.model.performance_samples}",
        )
    if pick.accuracy is not None:
        blocking += write_accuracy(pick, folder / "accuracy")
    else:
        blocking.append(
            f"no accuracy run of {pick.accelbench_model}: run accelbench infer {pick.accelbench_model} --mode "
            "accuracy (MLCommons' checker stops at a result without an accuracy folder)"
        )
    if pick.accuracy is not None:
        blocking += _unlike(perf, pick.accuracy, "accuracy run")
    for test, audit in pick.audits.items():
        blocking += _unlike(perf, audit, f"{test} run")
    if pick.accuracy_from:
        blocking.append(
            f"its accuracy run is the {pick.accuracy_from} one's: MLPerf asks an accuracy run in each scenario"
        )
    audit_why = write_audits(pick, folder, perf_dir)
    blocking += audit_why
    for test in pick.model.tests:
        if test not in pick.audits:
            said = f"MLPerf's compliance test {test} ({command_of(perf, audit=test)})"
            (blocking if plan_.division == "closed" else needs).append(said)
    if weights_of(pick).startswith("random"):
        (blocking if plan_.division == "closed" else needs).append(
            "MLPerf's reference weights (--checkpoint): these were random"
        )
    if plan_.division == "open":
        have = {p.scenario for p in plan_.picks if p.accelbench_model == pick.accelbench_model}
        missing = needed(pick.model, plan_.system_type, have)
        if missing:
            needs.append(f"{pick.model.name} in {', '.join(missing)} ({plan_.system_type})")
    headline = _headline(pick, detail)
    write_text(folder / "user.conf", user_conf(pick, detail))
    write_text(folder / "measurements.json", json.dumps(measurements(pick), indent=2) + "\n")
    written = Written(pick, folder, headline, _unique(blocking), _unique(needs), concerns)
    write_text(folder / "README.md", _result_readme(written, plan_, ident))
    return written


#: the settings a result's accuracy and audit runs must share with its performance run (they serve the same SUT)
_SAME_SUT = ("precision", "backend", "engine", "checkpoint", "batch_size", "scale")


def _unlike(perf: Source, other: Source, what: str) -> list[str]:
    """How ``other`` served another system under test than the performance run did, in words (empty: the same)."""
    differ = [
        f"{k} {other.params.get(k)!r} where the performance run has {perf.params.get(k)!r}"
        for k in _SAME_SUT
        if k in perf.params and other.params.get(k) != perf.params.get(k)
    ]
    return [f"its {what} served another system under test: {', '.join(differ)}"] if differ else []


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _headline(pick: Pick, detail: Mapping[str, Any]) -> str:
    token = pick.performance.record.benchmark == "infer/llm"
    key, scale, unit = (TOKEN_HEADLINE if token else HEADLINE).get(pick.scenario, HEADLINE["Offline"])
    value = detail.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f"no {key} in the detail log"
    return f"{value / scale:.6g} {unit} ({key})"


def _status_lines(w: Written) -> list[str]:
    if not w.not_for_submission:
        return ["compliant: nothing the records and logs show stops this result"]
    return ["not for submission: " + "; ".join(w.not_for_submission)]


def _result_readme(w: Written, plan_: Plan, ident: Identity) -> str:
    p = w.pick
    lines = [
        f"# {p.model.name} {p.scenario} on {ident.system}",
        "",
        f"Measured by accelbench {__version__} ({p.accelbench_model}); MLPerf Inference {plan_.round}, "
        f"{plan_.division} division, {plan_.system_type}.",
        "",
        f"Headline: {w.headline}.",
        "",
        *_status_lines(w),
        "",
    ]
    if w.closed_needs:
        lines += ["The closed division would still need: " + "; ".join(w.closed_needs) + ".", ""]
    lines += ["## How to reproduce", "", "```"]
    lines += [f"# performance ({p.performance.short})", command_of(p.performance)]
    if p.accuracy is not None:
        lines += [f"# accuracy ({p.accuracy.short})", command_of(p.accuracy)]
    for test, s in p.audits.items():
        lines += [f"# {test} ({s.short})", command_of(s)]
    lines += ["```", ""]
    if p.notes or w.concerns:
        lines += ["## Notes", ""] + [f"* {n}" for n in p.notes + w.concerns] + [""]
    return "\n".join(lines)


def system_description(plan_: Plan, ident: Identity) -> dict[str, Any]:
    """``systems/<system>.json`` from the system profile the records captured, the identity and the user's TOML;
    refused (one line naming every field to set) where MLCommons' checker would reject it."""
    first = plan_.picks[0].performance
    user = systems.load_user(ident.system_toml) if ident.system_toml is not None else None
    version = first.details.get("loadgen_version")
    desc = systems.describe(
        first.record.system,
        submitter=ident.org,
        division=plan_.division,
        system_name=ident.system,
        status=ident.status,
        system_type=plan_.system_type,
        user=user,
        loadgen_version=str(version).split(" @ ")[0] if version else None,
    )
    system_rules.check(desc)
    return desc


def summary(plan_: Plan, written: Sequence[Written], root: Path) -> list[str]:
    """What the command prints: each result, whether it is for submission, what it is missing."""
    lines = [
        f"MLPerf Inference {plan_.round} {plan_.division} tree, system type {plan_.system_type}: {redact(str(root))}"
    ]
    lines += [f"  note: {n}" for n in plan_.notes]
    for w in written:
        p = w.pick
        lines.append(f"{p.model.name} {p.scenario} ({p.accelbench_model}): {w.headline}")
        lines += [f"  {line}" for line in _status_lines(w)]
        went = [f"performance {p.performance.short}"]
        if p.accuracy is not None:
            went.append(f"accuracy {p.accuracy.short}" + (f" (from {p.accuracy_from})" if p.accuracy_from else ""))
        went += [f"{t} {s.short}" for t, s in p.audits.items()]
        lines.append("  in: " + ", ".join(went))
        lines += [f"  note: {n}" for n in p.notes]
        if w.closed_needs:
            lines.append("  the closed division would still need: " + "; ".join(w.closed_needs))
    return [redact(line) for line in lines]
