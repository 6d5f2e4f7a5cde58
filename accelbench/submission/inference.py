"""An MLCommons MLPerf Inference submission tree from stored accelbench runs: LoadGen's own logs in the folders and
under the names MLCommons' submission checker reads (docs/mlperf-rules.md §5), with the files a person writes by
hand made from what the records say, and nothing they do not say.

A tree is not a claim: each result says first whether it is for submission, and if not, why (the quick profile, a
cut duration, seeds of no round, an accuracy that was agreement with FP32 on synthetic samples), and what the
closed division would still need. An accuracy.txt carries MLPerf's metric only where the record measured it on the
benchmark's data set; otherwise it says in words what was measured, so that the checker reports the gap.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from accelbench import __version__
from accelbench.errors import UsageError
from accelbench.loadgen.logs import read_detail
from accelbench.loadgen.mlcommons import ACCELBENCH, AUDITS, ROUNDS, SCENARIO_DIRS, Model, model_of, round_of
from accelbench.results.record import Result
from accelbench.submission import systems
from accelbench.submission.truncate import truncate

if TYPE_CHECKING:
    from accelbench.loadgen.verify import Verification

#: the benchmarks whose records are LoadGen runs (image and other models; language models)
LOADGEN_BENCHMARKS = ("infer/loadgen", "infer/llm")
#: the modes whose record is a scenario's performance result (find-peak ends in a full run at the load it found)
PERFORMANCE_MODES = ("performance", "find-peak")
#: the system types in the order ``auto`` tries them: the narrowest category that holds every model
SYSTEM_TYPES = ("datacenter", "edge", "datacenter,edge")
DIVISIONS = ("open", "closed")
STATUSES = ("available", "preview", "rdi")
#: the files of a result's performance/run_1 and accuracy folders (REQUIRED_PERF_FILES, REQUIRED_ACC_FILES)
SUMMARY, DETAIL, ACCURACY_LOG, ACCURACY_TXT = (
    "mlperf_log_summary.txt",
    "mlperf_log_detail.txt",
    "mlperf_log_accuracy.json",
    "accuracy.txt",
)
PERF_FILES = (SUMMARY, DETAIL)
ACC_FILES = (SUMMARY, DETAIL, ACCURACY_TXT, ACCURACY_LOG)
#: the files in each result's own folder (REQUIRED_MEASURE_FILES and MEASUREMENTS_PATH v6.x)
MEASURE_FILES = ("user.conf", "README.md", "measurements.json")
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
#: the concerns that make a record not for submission (the others, contended among them, are said beside it)
_BLOCKING = ("non-compliant", "invalid", "uninformative", "no-verdict")


# --------------------------------------------------------------------------------------------------------- the inputs
@dataclass
class Source:
    """One record and the run it came from: where its run folder is and the command that made the run."""

    record: Result
    run_dir: Path | None
    run_command: str = ""
    #: the run's suite.json entries (what was asked, before accelbench resolved it), where the folder has them
    asked: list[dict[str, Any]] = field(default_factory=list)

    @property
    def params(self) -> dict[str, Any]:
        return self.record.params

    @property
    def details(self) -> Mapping[str, Any]:
        return self.record.details

    @property
    def mode(self) -> str:
        return str(self.params.get("mode") or "performance")

    @property
    def audit(self) -> str:
        return str(self.details.get("audit") or self.params.get("audit") or "")

    @property
    def scenario(self) -> str:
        return SCENARIO_DIRS.get(str(self.params.get("scenario")), "")

    @property
    def short(self) -> str:
        return f"{self.record.run_id} ({self.record.id[:8]})"

    def log_dir(self) -> Path:
        """The record's LoadGen log folder: where the record says, else where its run folder holds it now."""
        said = str(self.details.get("loadgen_log_dir") or "")
        tried = []
        if said:
            tried.append(Path(said))
            if self.run_dir is not None:
                tried.append(self.run_dir / "logs" / Path(said).name)
        for folder in tried:
            if (folder / DETAIL).is_file():
                return folder
        where = f" ({', '.join(_redact(str(t)) for t in tried)})" if tried else ""
        raise UsageError(
            f"record {self.short} ({_what(self)}) has no LoadGen log folder on disk{where}: "
            "copy its run folder back, or leave the run out"
        )

    def detail(self) -> dict[str, Any]:
        path = self.log_dir() / DETAIL
        try:
            return read_detail(path)
        except OSError as exc:
            raise UsageError(f"cannot read {_redact(str(path))}: {exc.strerror or exc}") from None


def read_run_folder(folder: Path) -> list[Source]:
    """The records of a run folder (``results.jsonl``), each with the folder and what its suite asked."""
    path = folder / "results.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        records = [Result.from_json(line) for line in lines if line.strip()]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    return [Source(r, folder, "", asked_of(folder)) for r in records]


def asked_of(folder: Path | None) -> list[dict[str, Any]]:
    """A run folder's suite entries (benchmark and the parameters asked), [] where it has none."""
    if folder is None:
        return []
    try:
        suite = json.loads((folder / "suite.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = suite.get("entries") if isinstance(suite, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


# ----------------------------------------------------------------------------------------------------------- the plan
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


def _what(s: Source) -> str:
    audit = f" {s.audit}" if s.audit else ""
    return f"{s.params.get('model')} {s.params.get('scenario')} {s.mode}{audit}"


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


def _needed(model: Model, stype: str, have: set[str]) -> list[str]:
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
        missing = _needed(model, stype, have)
        if missing:
            raise UsageError(
                f"{model.name} ({name}) on a {stype} system needs {', '.join(model.needs(stype))} in MLPerf "
                f"Inference {rnd}'s closed division; missing {', '.join(missing)}: run accelbench infer {name} "
                "--scenario ... for it, or write the open division"
            )
        allowed = set(model.needs(stype)) | set(model.optional.get(stype, ()))
        extra = sorted(have - allowed)
        if extra:
            raise UsageError(
                f"{model.name} ({name}) has no {', '.join(extra)} result in the closed division on a {stype} "
                f"system (it takes {', '.join(sorted(allowed))}): leave that run out"
            )


# --------------------------------------------------------------------------------------------------------- the writing
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
        raise UsageError(f"{_redact(str(results))} exists: remove it or write to another -o folder")
    written: list[Written] = []
    for pick in plan_.picks:
        written.append(_write_result(pick, results / pick.model.name / pick.scenario, plan_, ident))
    _write_src(root, plan_, written)
    _write_calibration(root, plan_)
    _write_text(root / "systems" / f"{ident.system}.json", json.dumps(desc, indent=2) + "\n")
    return written


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_redact(text), encoding="utf-8")


def _copy_logs(src: Path, dst: Path, names: Sequence[str]) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for name in names:
        text = (src / name).read_text(encoding="utf-8", errors="replace")
        (dst / name).write_text(_redact(text), encoding="utf-8")


def _write_result(pick: Pick, folder: Path, plan_: Plan, ident: Identity) -> Written:
    perf = pick.performance
    perf_dir = perf.log_dir()
    detail = perf.detail()
    _copy_logs(perf_dir, folder / "performance" / "run_1", PERF_FILES)
    blocking, concerns = _record_reasons(perf)
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
        blocking += _write_accuracy(pick, folder / "accuracy")
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
    audit_why = _write_audits(pick, folder, perf_dir)
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
        missing = _needed(pick.model, plan_.system_type, have)
        if missing:
            needs.append(f"{pick.model.name} in {', '.join(missing)} ({plan_.system_type})")
    headline = _headline(pick, detail)
    _write_text(folder / "user.conf", _user_conf(pick, detail))
    _write_text(folder / "measurements.json", json.dumps(measurements(pick), indent=2) + "\n")
    written = Written(pick, folder, headline, _unique(blocking), _unique(needs), concerns)
    _write_text(folder / "README.md", _result_readme(written, plan_, ident))
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


def _record_reasons(s: Source) -> tuple[list[str], list[str]]:
    """Why a record is not for submission (its non-compliance, its INVALID reasons) and its other concerns."""
    blocking = [str(x) for x in s.details.get("not_compliant") or []]
    concerns: list[str] = []
    for c in s.record.concerns:
        text = c.text
        if c.kind == "non-compliant":
            said = text.split(":", 1)[1].strip() if ":" in text else text
            if not any(part.strip() in blocking for part in said.split(";")):
                blocking.append(said)
        elif c.kind in _BLOCKING:
            blocking.append(text)
        else:
            concerns.append(text)
    return blocking, concerns


def _headline(pick: Pick, detail: Mapping[str, Any]) -> str:
    token = pick.performance.record.benchmark == "infer/llm"
    key, scale, unit = (TOKEN_HEADLINE if token else HEADLINE).get(pick.scenario, HEADLINE["Offline"])
    value = detail.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f"no {key} in the detail log"
    return f"{value / scale:.6g} {unit} ({key})"


# ------------------------------------------------------------------------------------------------------- accuracy.txt
def _write_accuracy(pick: Pick, folder: Path) -> list[str]:
    """The accuracy folder (LoadGen's logs, accuracy.txt, the truncated accuracy log); why it is not MLPerf's."""
    acc = pick.accuracy
    assert acc is not None
    src = acc.log_dir()
    _copy_logs(src, folder, (SUMMARY, DETAIL))
    text, why = accuracy_text(pick.model, acc)
    _write_text(folder / ACCURACY_TXT, text)
    shutil.copyfile(src / ACCURACY_LOG, folder / ACCURACY_LOG)
    truncate(folder / ACCURACY_LOG, folder / ACCURACY_TXT)
    blocking = _record_reasons(acc)[0]
    if why:  # says what the record's own "not scored on the data set" says, and what was measured instead
        blocking = [b for b in blocking if "not scored on the benchmark's data set" not in b] + [why]
    count = acc.detail().get("qsl_reported_total_count")
    if count != pick.model.dataset_size:
        blocking.append(f"its accuracy run scored {count} samples where MLPerf asks all {pick.model.dataset_size}")
    return blocking


def on_dataset(s: Source) -> bool:
    """Whether an accuracy record measured its quality on the benchmark's data set (not agreement with FP32 on
    synthetic samples): an image model against the data set's labels, a language model by ROUGE on MLPerf's own
    processed set (``--source mlperf``)."""
    d = s.details
    if d.get("accuracy_verified") is not True:
        return False
    if d.get("labels") == "dataset":
        return True
    prompts = d.get("prompts")
    return isinstance(prompts, dict) and bool(prompts.get("mlperf_benchmark")) and isinstance(d.get("rouge"), dict)


def accuracy_text(model: Model, s: Source) -> tuple[str, str | None]:
    """accuracy.txt for an accuracy record, in the form MLCommons' script for ``model`` prints, where the record
    measured it on the benchmark's data set; else words saying what was measured, with no line the checker reads
    as MLPerf's metric. Returns the text and why the result's accuracy does not hold MLPerf's (None: it does)."""
    found = _metric(model, s) if on_dataset(s) else None
    if found is None:
        return _not_measured(model, s), (
            f"its accuracy was not MLPerf's {model.name} metric on the benchmark's data set: "
            + str(s.details.get("gate") or "accelbench measured something else")
        )
    line, values = found
    short = [f"{k} {values[k]:.6g} < {t:g}" for k, t in model.accuracy_targets if k in values and values[k] < t]
    short += [f"{k} {values[k]:.6g} > {t:g}" for k, t in model.accuracy_upper if k in values and values[k] > t]
    missing = [k for k, _ in model.accuracy_targets if k not in values]
    why = []
    if short:
        why.append(f"its accuracy misses MLPerf's targets: {', '.join(short)}")
    if missing:
        why.append(f"accelbench recorded no {', '.join(missing)} for it")
    return line + "\n", "; ".join(why) or None


def _figure(s: Source, name: str) -> float | None:
    m = s.record.metrics.get(name)
    return float(m.value) if m is not None and isinstance(m.value, (int, float)) else None


def _metric(model: Model, s: Source) -> tuple[str, dict[str, float]] | None:
    """MLPerf's accuracy.txt line for the metrics accelbench computes as MLCommons' scripts do, and the values by
    the checker's names (None: accelbench computes no such metric for this model)."""
    keys = {k for k, _ in model.accuracy_targets}
    samples = s.details.get("samples")
    if keys == {"acc"}:  # vision/classification_and_detection/tools/accuracy-imagenet.py
        top1 = _figure(s, "top1")
        if top1 is None or not isinstance(samples, int):
            return None
        line = f"accuracy={100 * top1:.3f}%, good={round(top1 * samples)}, total={samples}"
        return line, {"acc": 100 * top1}
    if {"ROUGE1", "ROUGE2", "ROUGEL"} <= keys:  # language/llama3.1-8b/evaluation.py: a dict of strings
        rouge = s.details.get("rouge")
        rouge = rouge if isinstance(rouge, dict) else {}
        values = rouge.get("served") or (rouge.get("verdict") or {}).get("values")
        names = ("rouge1", "rouge2", "rougeL", "rougeLsum")
        if not isinstance(values, dict) or not all(isinstance(values.get(k), (int, float)) for k in names):
            return None
        out: dict[str, Any] = {k: f"{float(values[k]):.4f}" for k in names}
        found = {k.upper(): float(values[k]) for k in names}
        n = samples if isinstance(samples, int) else values.get("samples")
        chars = values.get("chars_per_sample")
        if isinstance(n, int) and isinstance(chars, (int, float)):
            out["gen_len"] = round(chars * n)
            out["gen_num"] = n
            found["GEN_LEN"] = float(out["gen_len"])
        return "\nResults\n\n" + repr(out), found
    return None


def _not_measured(model: Model, s: Source) -> str:
    """What an accuracy record measured, in words, with nothing MLCommons' patterns read as a metric."""
    d = s.details
    primary = s.record.primary_metric
    figures = []
    for name, m in s.record.metrics.items():
        if isinstance(m.value, (int, float)):
            words = name.replace("_", " ")
            unit = f" ({m.unit})" if m.unit and m.unit != words else ""
            figures.append(f"  {words} = {m.value:.6g}{unit}")
    lines = [
        f"NOT MLPERF'S ACCURACY. accelbench did not measure the {model.name} metric on the benchmark's data set",
        f"in this run ({s.record.run_id}, record {s.record.id[:8]}). What it measured instead:",
        f"  gate: {d.get('gate') or 'none recorded'}",
        f"  answers judged against: {d.get('labels') or 'not recorded'}",
        f"  samples: {d.get('samples') if d.get('samples') is not None else 'not recorded'}",
        *figures,
        f"  primary figure: {(primary or 'none').replace('_', ' ')}",
        f"  weights: {_weights(s)}",
        "An agreement with FP32 on synthetic samples says the serving path kept the model's answers; it says",
        "nothing of the model's quality on the data set, so no line here is MLPerf's metric and the checker",
        f"reports this result's accuracy as missing. Score it on the data set ({_how_to_score(s)}).",
    ]
    return "\n".join(lines) + "\n"


def _how_to_score(s: Source) -> str:
    if s.record.benchmark == "infer/llm":
        return "--source mlperf --mlperf-data DIR with the reference weights in --checkpoint"
    return "--dataset DIR with the reference weights in --checkpoint"


# ------------------------------------------------------------------------------------------------------------- audits
def _write_audits(pick: Pick, folder: Path, perf_dir: Path) -> list[str]:
    """Each audit record's TEST0X folder (§4): its logs and the verifier's files; why a test did not pass."""
    why: list[str] = []
    for test, s in pick.audits.items():
        tdir = folder / test
        audit_dir = s.log_dir()
        why += [f"{test}: {w}" for w in _record_reasons(s)[0]]
        if test in ("TEST01", "TEST04"):
            _copy_logs(audit_dir, tdir / "performance" / "run_1", PERF_FILES)
        if test in ("TEST01", "TEST06") and (audit_dir / ACCURACY_LOG).is_file():
            (tdir / "accuracy").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(audit_dir / ACCURACY_LOG, tdir / "accuracy" / ACCURACY_LOG)
            if test == "TEST01":  # MLCommons' truncation walks TEST01 and needs its accuracy.txt
                _write_text(
                    tdir / "accuracy" / ACCURACY_TXT,
                    f"TEST01: the answers LoadGen sampled from the audit run {s.record.run_id} (record "
                    f"{s.record.id[:8]}) in performance mode; verify_accuracy.txt compares them\n",
                )
                truncate(tdir / "accuracy" / ACCURACY_LOG, tdir / "accuracy" / ACCURACY_TXT)
        verdict = _verify(test, pick, s, perf_dir)
        if isinstance(verdict, str):
            why.append(f"{test} not verified: {verdict}")
            continue
        for name, text in verdict.files.items():
            target = (tdir / name).resolve()
            if tdir.resolve() not in target.parents:
                raise UsageError(f"the {test} verifier named a file outside its folder: {name!r}")
            _write_text(target, text)
        if not verdict.passed:
            why.append(f"{test} failed: {'; '.join(verdict.why)}")
    return why


def _verify(test: str, pick: Pick, s: Source, perf_dir: Path) -> Verification | str:
    """The verifier's verdict on an audit record, or why there is none."""
    from accelbench.loadgen import verify

    audit_dir = s.log_dir()
    dtype = str(s.details.get("answer_dtype") or (pick.accuracy.details.get("answer_dtype") if pick.accuracy else "")
                or "int32")  # fmt: skip
    try:
        if test == "TEST01":
            if pick.accuracy is None or pick.accuracy_from:
                return "TEST01 compares the audit run's answers with an accuracy run in the same scenario: none"
            return verify.test01(pick.accuracy.log_dir(), perf_dir, audit_dir, dtype)
        if test == "TEST04":
            return verify.test04(perf_dir, audit_dir)
        if test == "TEST06":
            verdicts = [verify.test06(audit_dir, pick.scenario, eos, dtype) for eos in _eos_ids(s)]
            return next((v for v in verdicts if not v.passed), verdicts[-1])
    except UsageError as exc:
        return str(exc)
    return f"accelbench has no verifier for {test}"


def _eos_ids(s: Source) -> list[int | None]:
    """The end-of-sequence ids TEST06 counts at an answer's end: each the engine recorded (a model may have
    several; each is checked), else [None], which TEST06 reports as a check it could not make."""
    engine = s.details.get("engine")
    said = engine.get("eos_token_id") if isinstance(engine, dict) else None
    said = s.details.get("eos_token_id", said)
    ids = said if isinstance(said, list) else [said]
    found: list[int | None] = [i for i in ids if isinstance(i, int) and not isinstance(i, bool)]
    return found or [None]


# ------------------------------------------------------------------------------------------- measurements and user.conf
def _weights(s: Source) -> str:
    checkpoint = str(s.params.get("checkpoint") or "")
    if checkpoint:
        return Path(checkpoint).name
    return str(s.details.get("weights") or "random (accelbench's default: no --checkpoint)")


def weights_of(pick: Pick) -> str:
    """The weights a result served: its checkpoint's file name, else what its records say of them (a performance
    record may say nothing where its accuracy run, on the same weights, says how they were made)."""
    said = _weights(pick.performance)
    if pick.performance.details.get("weights") or pick.performance.params.get("checkpoint") or pick.accuracy is None:
        return said
    same = pick.accuracy.params.get("checkpoint") == pick.performance.params.get("checkpoint")
    return _weights(pick.accuracy) if same else said


#: accelbench's ``--precision`` -> (input data types, weight data types, how the weights were changed)
_PRECISION = {
    "fp32": ("fp32", "fp32", "none"),
    "bf16": ("bf16", "bf16", "weights cast from fp32 to bf16"),
    "fp16": ("fp16", "fp16", "weights cast from fp32 to fp16"),
    "amp_bf16": ("fp32", "fp32", "none (torch.autocast computes in bf16 at run time)"),
    "amp_fp16": ("fp32", "fp32", "none (torch.autocast computes in fp16 at run time)"),
    "int8": ("fp32", "int8", "weights quantised to int8 by accelbench's int8 backend"),
}


def measurements(pick: Pick) -> dict[str, Any]:
    """measurements.json's five required fields (SYSTEM_IMP_REQUIRED_FILES), from the performance record."""
    s = pick.performance
    precision = str(s.params.get("precision") or "fp32")
    inputs, weights, transform = _PRECISION.get(precision, (precision, precision, f"as --precision {precision}"))
    if s.record.benchmark == "infer/llm":
        inputs = "int32 (token ids)"
    start = weights_of(pick)
    if start.startswith("random"):
        transform = f"{transform}; the weights are random (no checkpoint), not MLPerf's reference weights"
    return {
        "input_data_types": inputs,
        "retraining": "no",
        "starting_weights_filename": start,
        "weight_data_types": weights,
        "weight_transformations": transform,
    }


#: user.conf lines from the detail log's requested settings: (scenario or "*", conf key, log key, scale)
_USER_CONF = (
    ("Offline", "target_qps", "requested_offline_expected_qps", 1.0),
    ("Server", "target_qps", "requested_server_target_qps", 1.0),
    ("Server", "target_latency", "requested_server_target_latency_ns", 1e6),
    ("Server", "target_latency_percentile", "requested_server_target_latency_percentile", 0.01),
    ("SingleStream", "target_latency", "requested_single_stream_expected_latency_ns", 1e6),
    ("SingleStream", "target_latency_percentile", "requested_single_stream_target_latency_percentile", 0.01),
    ("MultiStream", "target_latency", "requested_multi_stream_expected_latency_ns", 1e6),
    ("MultiStream", "target_latency_percentile", "requested_multi_stream_target_latency_percentile", 0.01),
    ("MultiStream", "samples_per_query", "requested_multi_stream_samples_per_query", 1.0),
    ("*", "min_duration", "requested_min_duration_ms", 1.0),
    ("*", "max_duration", "requested_max_duration_ms", 1.0),
    ("*", "min_query_count", "requested_min_query_count", 1.0),
    ("*", "max_query_count", "requested_max_query_count", 1.0),
    ("*", "performance_sample_count_override", "requested_performance_sample_count_override", 1.0),
)


def _user_conf(pick: Pick, detail: Mapping[str, Any]) -> str:
    """The settings the run gave LoadGen, as user.conf lines (the seeds are mlperf.conf's alone)."""
    scen = "Server" if pick.scenario == "Interactive" else pick.scenario
    lines = [
        "# The settings accelbench gave LoadGen for this result, read back from its detail log (requested_*).",
        f"# accelbench {__version__}; the official profile loads LoadGen's own mlperf.conf under these.",
    ]
    for where, key, logged, scale in _USER_CONF:
        if where not in ("*", scen):
            continue
        value = detail.get(logged)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if key.endswith("max_duration") or key.startswith("max_") or key.endswith("override"):
            if not value:
                continue
        lines.append(f"{pick.model.conf}.{scen}.{key} = {_num(value / scale)}")
    return "\n".join(lines) + "\n"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


# ----------------------------------------------------------------------------------------------------------- commands
def command_of(s: Source, **change: Any) -> str:
    """The command that makes this record again: ``accelbench <command> MODEL`` and each setting asked (the suite
    entry of the run folder, else the record's resolved settings) that differs from the benchmark's default;
    ``change``: settings to give otherwise (``audit="TEST01"``: the same run as that compliance test)."""
    from accelbench.registry import BENCHMARKS, route

    params = (_asked(s) or dict(s.params)) | change
    info = BENCHMARKS.get(route(s.record.benchmark, params)) or BENCHMARKS.get(s.record.benchmark)
    if info is None or info.command is None:
        return _redact(s.run_command) or f"(no command: {s.record.benchmark} {json.dumps(params, sort_keys=True)})"
    cmd = info.command
    words = ["accelbench", cmd.name, str(params.get(cmd.positional, ""))]
    defaults = info.params().to_dict()
    for f, _ in info.params.flags():
        if f.name == cmd.positional or f.name not in params:
            continue
        value, default = params[f.name], defaults.get(f.name)
        if value is None or value == default:
            continue
        flag = str(f.metadata.get("flag") or "--" + f.name.replace("_", "-"))
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif isinstance(value, float):
            words += [flag, _num(value)]
        elif isinstance(value, (int, str)):
            words += [flag, _redact(str(value))]
    return shlex.join(words)


def _asked(s: Source) -> dict[str, Any] | None:
    """The suite entry that asked for this record: the one entry of its benchmark with its model, scenario, mode
    and audit (None where the run folder is gone or several entries match)."""
    keys = ("model", "scenario", "mode")
    found = []
    for entry in s.asked:
        params = entry.get("params")
        if not isinstance(params, dict):
            continue
        if all(params.get(k) == s.params.get(k) for k in keys) and str(params.get("audit") or "") == s.audit:
            found.append(params)
    return dict(found[0]) if len(found) == 1 else None


# ------------------------------------------------------------------------------------------------------------- README
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


def _write_src(root: Path, plan_: Plan, written: Sequence[Written]) -> None:
    from importlib import metadata

    try:
        loadgen = metadata.version("mlcommons-loadgen")
    except metadata.PackageNotFoundError:
        loadgen = "the version in each detail log's loadgen_version"
    lines = [
        "# How these results were made",
        "",
        f"With accelbench {__version__}, a benchmark suite that drives MLCommons' LoadGen (mlcommons-loadgen "
        f"{loadgen}) with its own system under test. The code is accelbench itself:",
        "",
        "```",
        f"pip install accelbench=={__version__}   # or, from its source tree at that version: pip install .",
        f"pip install mlcommons-loadgen=={loadgen}",
        "```",
        "",
        "Each result was made by one command (LoadGen writes its logs into the run folder, accelbench-runs/RUN/):",
        "",
    ]
    for w in written:
        p = w.pick
        lines += [f"## {p.model.name} {p.scenario}", "", "```", command_of(p.performance)]
        if p.accuracy is not None:
            lines.append(command_of(p.accuracy))
        lines += [command_of(s) for s in p.audits.values()]
        lines += ["```", ""]
    _write_text(root / "src" / "README.md", "\n".join(lines))


def _write_calibration(root: Path, plan_: Plan) -> None:
    lines = [
        "# Calibration and weights",
        "",
        "What accelbench did to each model's weights before serving it, as its records say. Nothing else was done: "
        "no quantisation calibration set was used unless a model's entry below names one.",
        "",
    ]
    seen: set[tuple[str, str, str]] = set()
    for p in plan_.picks:
        s = p.performance
        precision = str(s.params.get("precision") or "fp32")
        key = (p.accelbench_model, weights_of(p), precision)
        if key in seen:
            continue
        seen.add(key)
        transform = measurements(p)["weight_transformations"]
        calibration = s.details.get("calibration")
        cal = f"quantisation calibration: {calibration}" if calibration else "quantisation calibration: none recorded"
        lines += [
            f"## {p.model.name} ({p.accelbench_model}, --precision {precision})",
            "",
            f"* weights: {weights_of(p)}",
            f"* transformations: {transform}",
            f"* {cal}",
            "",
        ]
    _write_text(root / "documentation" / "calibration.md", "\n".join(lines))


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
    systems.check(desc)
    return desc


# ------------------------------------------------------------------------------------------------------------- secrets
def _secrets() -> list[tuple[re.Pattern[str], str]]:
    out = []
    home = os.path.expanduser("~")
    if home and home not in ("/", "~") and len(home) > 1:
        out.append((re.compile(re.escape(home.rstrip("/")) + r"(?=/|\b|$)"), "~"))
    host = socket.gethostname()
    if host:
        for name in {host, host.split(".")[0]}:
            if name:
                out.append((re.compile(r"(?<![A-Za-z0-9])" + re.escape(name) + r"(?![A-Za-z0-9])"), "HOST"))
    return out


def _redact(text: str) -> str:
    """``text`` with the user's home folder written ``~`` and the host's name ``HOST``: nothing of the machine's
    identity goes into a tree another person reads."""
    for pattern, by in _secrets():
        text = pattern.sub(by, text)
    return text


# ------------------------------------------------------------------------------------------------------------ summary
def summary(plan_: Plan, written: Sequence[Written], root: Path) -> list[str]:
    """What the command prints: each result, whether it is for submission, what it is missing."""
    lines = [
        f"MLPerf Inference {plan_.round} {plan_.division} tree for a {plan_.system_type} system: {_redact(str(root))}"
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
    return [_redact(line) for line in lines]
