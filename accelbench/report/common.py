"""What every section needs: system labels, figures as cells, caps on how much one report draws."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from accelbench.families import Family, owns
from accelbench.plugins import load_object
from accelbench.report.model import Cell, Section, Text
from accelbench.results import format as fmt
from accelbench.results.describe import Describe, plain
from accelbench.results.details import typed
from accelbench.results.record import Metric, Result
from accelbench.results.store import RunInfo

#: At most this many charts of one kind (the newest run of each workload is drawn, earlier ones are in the
#: tables): a report of 1,000 records stays readable, and quick to draw.
MAX_CHARTS = 6


@dataclass
class ReportInput:
    """The records a report covers, and what it may read beside them.

    ``history`` holds earlier ok records of the same systems (from the store), for the history section;
    ``describe`` names a workload (the CLI passes the registry's, so that the report imports no family).
    """

    records: list[Result]
    history: list[Result] = field(default_factory=list)
    runs: list[RunInfo] = field(default_factory=list)
    describe: Describe = plain
    title: str = "accelbench report"

    def ok(self, prefix: str = "") -> list[Result]:
        return [r for r in self.records if r.status == "ok" and r.benchmark.startswith(prefix)]

    def of(self, prefix: str) -> list[Result]:
        return [r for r in self.records if r.benchmark.startswith(prefix)]

    def of_family(self, family: Family, ok: bool = False) -> list[Result]:
        """The records of ``family``'s benchmarks (only those measured, with ``ok``)."""
        return [r for r in self.records if owns(family, r.benchmark) and (r.status == "ok" or not ok)]

    def name(self, r: Result) -> str:
        return self.describe(r.benchmark, r.params)


def system_label(profile: dict[str, Any]) -> str:
    """'4x NVIDIA A100-SXM4-80GB' or 'AMD EPYC, 2 cores': what a reader recognises a machine by."""
    accs = profile.get("accelerators") or []
    if accs:
        names: dict[str, int] = {}
        for a in accs:
            names[str(a.get("name", "accelerator"))] = names.get(str(a.get("name", "accelerator")), 0) + 1
        return ", ".join(f"{n}x {name}" for name, n in names.items())
    cpu = profile.get("cpu") or {}
    cores = cpu.get("physical_cores")
    return f"{cpu.get('model') or 'unknown CPU'}" + (f", {cores} cores" if cores else "")


def systems(records: Iterable[Result]) -> dict[str, str]:
    """Fingerprint -> a label unique in this report (hostname and fingerprint added where labels collide)."""
    profiles: dict[str, dict[str, Any]] = {}
    for r in records:
        profiles.setdefault(r.fingerprint, r.system.get("profile") or {})
    labels = {fp: system_label(p) for fp, p in profiles.items()}
    seen: dict[str, int] = {}
    for label in labels.values():
        seen[label] = seen.get(label, 0) + 1
    for fp, p in profiles.items():
        if seen[labels[fp]] > 1:
            labels[fp] = f"{labels[fp]} ({p.get('hostname') or 'host'} {fp[:6]})"
    return labels


def figure(m: Metric | None) -> str:
    """'0.184 TFLOPS ±1.2%': the figure with the digits its interval supports."""
    if m is None:
        return ""
    return f"{fmt.metric(m)} {fmt.ci_percent(m)}".strip()


def cost(r: Result) -> str:
    """'$10.4 per 1M samples at $3.673/h': what the work cost, where the record carries a price."""
    m = r.metrics.get("usd_per_million")
    if m is None:
        return ""
    stated = r.system.get("price") or {}
    price = stated.get("usd_per_hour")
    text = f"${fmt.number(m.value, 3)} {m.unit.removeprefix('USD ')}" + (f" at ${price:,.4g}/h" if price else "")
    if stated.get("power_cost_kwh") is not None and "energy" not in (stated.get("parts") or {}):
        text += " (electricity not included: no power measured, no --board-watts)"  # never silently dropped
    if stated.get("mismatch"):
        text += f" (priced with --price-mismatch-ok: {stated['mismatch']})"
    return text


#: the energy per unit of work a record may carry (cost.figures.energy): per sample, per query, per output token
ENERGY = ("joules_per_sample", "millijoules_per_query", "joules_per_output_token")


def energy(r: Result) -> str:
    """'0.2 J per image at 40 W': the measured energy of the work, where the window's energy was measured."""
    m = next((r.metrics[k] for k in ENERGY if k in r.metrics), None)
    if m is None:
        return ""
    watts = r.metrics.get("average_watts")
    return f"{fmt.number(m.value, 3)} {m.unit}" + (f" at {fmt.number(watts.value, 3)} W" if watts else "")


def efficiency_columns(records: Iterable[Result]) -> list[tuple[str, Callable[[Result], str]]]:
    """The cost and energy columns a family table shows, each only where some record has the figure."""
    recs = list(records)
    cols: list[tuple[str, Callable[[Result], str]]] = []
    if any("usd_per_million" in r.metrics for r in recs):
        cols.append(("cost", cost))
    if any(k in r.metrics for r in recs for k in ENERGY):
        cols.append(("energy", energy))
    return cols


def verdict(valid: bool | None, r: Result | None = None) -> Cell:
    """The verdict's cell; given the record, in its words (an FP32 agreement is not MLPerf's VALID)."""
    if valid is None:
        return Cell("")
    word = fmt.verdict_word(r) if r is not None else ("VALID" if valid else "INVALID")
    return Cell(word, "good") if valid else Cell(word, "bad")


def status_cell(r: Result) -> Cell:
    return Cell(r.status, {"ok": "good", "failed": "bad", "skipped": "warn"}[r.status])


def pct(m: Metric | None, estimated: bool = False) -> str:
    if m is None:
        return ""
    return f"{fmt.number(m.value, 3)}%" + (" (est.)" if estimated else "")


def warnings_text(r: Result) -> str:
    return "; ".join(r.warnings)


def caveat(r: Result) -> str:
    """' (contended, noisy: read with care)' where the record's own concerns make its figure unfit to compare (the
    kinds ``compare`` sets aside), so a summary line never states such a figure plain; '' otherwise."""
    from accelbench.results.judge import SET_ASIDE

    kinds = sorted({c.label for c in r.of_kind(*SET_ASIDE)})
    return f" ({', '.join(kinds)}: read with care)" if kinds else ""


def newest_first(records: Iterable[Result]) -> list[Result]:
    return sorted(records, key=lambda r: r.started_at, reverse=True)


def standing(inp: "ReportInput", records: Iterable[Result]) -> list[tuple[Result, int]]:
    """One record per workload on each system, and how many records it stands for: the newest fit to compare
    (a contended or noisy one only where it is all there is). A summary states each workload once, not each
    repeat: 45 lines for 15 workloads, contended repeats among them, read as 45 findings."""
    groups: dict[str, list[Result]] = {}
    for r in records:
        groups.setdefault(f"{r.fingerprint} {r.benchmark} {inp.name(r)}{sent_lengths(r)}", []).append(r)
    return [(min(newest_first(rs), key=lambda r: bool(caveat(r))), len(rs)) for rs in groups.values()]


def sent_lengths(r: Result) -> str:
    """' (sent 113/30.2 tokens a request)' where a serving run sent other lengths than its label's (its
    ``lengths-differ`` concern; the label keeps what was asked, the run's identity): such a run did other work a
    request, so a summary never pools it with the runs that sent what they asked, and says what it sent."""
    for c in r.concerns:
        if c.kind == "lengths-differ" and "mean_in" in c.data and "mean_out" in c.data:
            return f" (sent {c.data['mean_in']:.0f}/{fmt.number(float(c.data['mean_out']), 3)} tokens a request)"
    return ""


def of_runs(n: int) -> str:
    """' (the newest fit to compare of 3 runs)' where a summary line stands for several records; '' for one."""
    return f" (the newest fit to compare of {n} runs)" if n > 1 else ""


def device_of(r: Result) -> str:
    """The device a record ran on, as the record names it (its details, else its parameter)."""
    return str(typed(r).get("device_name") or r.params.get("device") or "")


def hook(target: str) -> Callable[..., Any]:
    """A family's report function named ``module:function`` (a family description imports no report code)."""
    fn: Callable[..., Any] = load_object(target, "report function")
    return fn


def system_cells(labels: dict[str, str], r: Result, multi: bool) -> list[str | Cell]:
    """A table row's first cell, the label of ``r``'s system, where the report covers several; none where one."""
    return [labels[r.fingerprint]] if multi else []


def on_system(inp: ReportInput, r: Result) -> str:
    """' on 4x NVIDIA A100' where the report covers several systems; nothing where it covers one."""
    labels = systems(inp.records)
    return f" on {labels[r.fingerprint]}" if len(labels) > 1 else ""


def family_section(
    inp: ReportInput, family: Family, sid: str, title: str, note: str
) -> tuple[list[Result], dict[str, str], Section] | None:
    """A family's records, the report's system labels, and its section opened with how it was measured."""
    recs = inp.of_family(family)
    if not recs:
        return None
    return recs, systems(inp.records), Section(sid, title, [Text(note, "note")])


def flags(r: Result) -> list[str]:
    """What makes a run's figures unfit to read as the setup's own: 'INVALID' (LoadGen's verdict), 'contended'
    (other work shared the machine: a concern of kind 'contended'); none for a VALID, uncontended run."""
    return ["INVALID"] * (r.valid is False) + ["contended"] * r.has("contended")


#: the columns that say whether a LoadGen run may be submitted: its profile, the MLPerf round its seeds are, the
#: LoadGen that ran it, and compliant or why not
MLPERF_COLUMNS = ("profile", "round", "LoadGen", "submission")


def mlperf_cells(r: Result) -> list[str]:
    """A LoadGen run's profile, round, LoadGen version and whether it may be submitted (its record's words)."""
    d: dict[str, Any] = dict(r.details)
    version = str(d.get("loadgen_version") or "").split(" @ ")[0]
    if d.get("audit"):
        submission = f"compliance test {d['audit']}"
    elif d.get("compliant"):
        submission = "compliant"
    elif d.get("not_compliant"):
        submission = "not for submission: " + "; ".join(d["not_compliant"])
    else:
        submission = "not for submission: quick profile" if r.params.get("profile") == "quick" else ""
    return [str(r.params.get("profile") or ""), str(d.get("mlperf_round") or ""), version, submission]
