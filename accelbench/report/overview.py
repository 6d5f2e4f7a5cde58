"""The first things a reader needs: what was measured where (machines, runs) and the verdict in words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.families import families
from accelbench.report.common import ReportInput, hook, newest_first, systems
from accelbench.report.model import Bullets, Section, Table, Text
from accelbench.results import format as fmt
from accelbench.results.details import invalid_reasons, peak_of
from accelbench.results.record import Result
from accelbench.system.specs import find_spec


def machines(inp: ReportInput) -> Section | None:
    if not inp.records:
        return None
    labels = systems(inp.records)
    profiles: dict[str, dict[str, Any]] = {}
    for r in inp.records:
        profiles.setdefault(r.fingerprint, r.system.get("profile") or {})
    section = Section("machines", "Machines")
    section.blocks.append(
        Table(
            ["system", "fingerprint", "host", "CPU", "memory", "OS", "software"],
            [_system_row(labels[fp], fp, p) for fp, p in profiles.items()],
            caption="The fingerprint hashes the hardware and the software stack: figures are compared only "
            "between records that share one, or side by side in Comparisons.",
        )
    )
    accs = [(labels[fp], a) for fp, p in profiles.items() for a in p.get("accelerators") or []]
    if accs:
        section.blocks.append(
            Table(
                [
                    "system",
                    "#",
                    "accelerator",
                    "memory",
                    "compute capability",
                    "driver",
                    "peak TFLOPS (dense)",
                    "memory bandwidth",
                    "source",
                ],
                [_accelerator_row(label, a) for label, a in accs],
                caption="Peaks come from the shipped spec table (datasheets), not from a measurement.",
            )
        )
    for label, a in accs:
        if a.get("topology"):
            section.blocks.append(Text(f"{label}:\n{a['topology']}", "pre"))
    if inp.runs:
        section.blocks.append(_runs_table(inp))
    return section


def _system_row(label: str, fp: str, p: dict[str, Any]) -> list[str]:
    """One machine's profile: its host, CPU, memory, OS and software stack."""
    cpu, torch_, os_ = p.get("cpu") or {}, p.get("torch") or {}, p.get("os") or {}
    clock = f", {cpu['clock_ghz']:.2f} GHz" if cpu.get("clock_ghz") else ""
    flags = f" ({' '.join(cpu.get('flags') or [])})" if cpu.get("flags") else ""
    software = ", ".join(
        f"{k} {v}"
        for k, v in (
            ("torch", torch_.get("version")),
            ("CUDA", torch_.get("cuda")),
            ("cuDNN", torch_.get("cudnn")),
            ("NCCL", torch_.get("nccl")),
            ("Python", (p.get("python") or {}).get("version")),
        )
        if v
    )
    return [
        label,
        fp,
        p.get("hostname") or "",
        f"{cpu.get('model', '')}: {cpu.get('physical_cores', '?')} cores / "
        f"{cpu.get('logical_cores', '?')} threads{clock}{flags}",
        fmt.bytes_((p.get("memory") or {}).get("total_bytes") or 0),
        f"{os_.get('name', '')} (kernel {os_.get('kernel', '')})",
        software,
    ]


def _accelerator_row(label: str, a: dict[str, Any]) -> list[str]:
    """One accelerator as its machine reported it, with the peaks the spec table gives its name."""
    spec = find_spec(str(a.get("name", "")))
    peaks = ", ".join(f"{k} {v:g}" for k, v in spec.peaks.items()) if spec else "not in the spec table"
    return [
        label,
        str(a.get("index", "")),
        str(a.get("name", "")),
        fmt.bytes_(a.get("memory_bytes") or 0),
        str(a.get("compute_capability", "")),
        str(a.get("driver", "")),
        peaks,
        f"{spec.mem_bw_gbs:g} GB/s" if spec and spec.mem_bw_gbs else "",
        spec.source if spec else "",
    ]


def _runs_table(inp: ReportInput) -> Table:
    """The runs the report covers, with how many of its records each made."""
    return Table(
        ["run", "started", "command", "tags", "records"],
        [
            [
                run.run_id,
                run.created_at[:19].replace("T", " "),
                run.command,
                ", ".join(f"{k}={v}" for k, v in sorted(run.tags.items())),
                str(sum(1 for r in inp.records if r.run_id == run.run_id)),
            ]
            for run in inp.runs
        ],
        caption="The runs this report covers.",
    )


def _best(inp: ReportInput) -> list[str]:
    """The headline figure per workload family: what a manager asks first (each family's own lines, in the
    report's order of families)."""
    lines: list[str] = []
    for family in families():
        if family.headline is not None and (recs := inp.of_family(family, ok=True)):
            lines += hook(family.headline)(inp, recs)
    return lines


#: the concern kinds that make a figure unfit to compare, the words their text opens with (dropped from each run's
#: detail), the word each is listed under, and what to do about it
CONCERNS = (
    (
        "contended",
        "contended",
        "Contended",
        "rerun on a quiet machine: other work shared it, and the figures measure that too",
    ),
    ("noisy", "noisy", "Noisy", "rerun on a quieter machine, or measure longer (--min-time)"),
    (
        "throttled",
        "GPU throttled",
        "Throttled",
        "the clocks were held down: cool the GPU or lift its power limit, then rerun",
    ),
)
#: the runs one "Read with care" line names at most (the rest counted)
CARE_RUNS = 8


@dataclass(frozen=True)
class Concern:
    """One reason one result is unfit to compare, split so that the runs sharing a reason are listed once: its
    ``kind`` ('INVALID', 'Contended', 'Failed'...), the ``reason`` within it the runs are grouped by ('TTFT
    constraint not met (LoadGen)'; '' where the kind says it), this run's own ``detail`` (its figures) and the
    ``advice`` ('lower --target-qps'), said once for the group where the runs share it."""

    kind: str
    reason: str
    detail: str
    advice: str
    label: str


def _split(text: str) -> tuple[str, str, str]:
    """'TTFT constraint not met (LoadGen): p99 TTFT 1.151e+04 ms over the 2000 ms limit; lower --target-qps' as
    its reason, its figures and its advice (the part after the last '; ', which a verdict's words end with)."""
    reason, _, rest = text.partition(": ")
    detail, _, advice = rest.rpartition("; ") if "; " in rest else (rest, "", "")
    return reason, detail, advice


def _care(r: Result, label: str) -> list[Concern]:
    """What makes one figure unfit to compare: INVALID, contended, noisy, throttled (each said, none hiding another)."""
    out = []
    if r.valid is False:
        for why in invalid_reasons(r) or ["LoadGen's verdict"]:
            out.append(Concern("INVALID", *_split(why), label))
    for c in r.concerns:
        for kind, opening, word, advice in CONCERNS:
            if c.kind == kind:
                out.append(Concern(word, "", c.text.removeprefix(opening).lstrip(": "), advice, label))
    return out


def _runs(entries: list[str]) -> str:
    """'a, b (2 runs), c': each run's entry once, with how many runs share it, at most CARE_RUNS of them."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e] = counts.get(e, 0) + 1
    named = [f"{e} ({n} runs)" if n > 1 else e for e, n in counts.items()]
    more = [f"and {len(named) - CARE_RUNS} more"] * (len(named) > CARE_RUNS)
    return ("; " if any("(" in e for e in counts) else ", ").join(named[:CARE_RUNS] + more)


def grouped(concerns: list[Concern]) -> list[str]:
    """The "Read with care" lines: one per kind and reason, naming its runs and saying once what they share (the
    advice, and the figures where alike), so a dozen contended runs are one line, not a dozen repeating the same
    advice: 'Contended (3 runs: a (other processes used 64% ...); b (...)): rerun on a quiet machine ...'. A reason
    that one run alone has reads as before ('INVALID: a: its reasons'), all of that run's such reasons on one line."""
    groups: dict[tuple[str, str], list[Concern]] = {}
    for c in concerns:
        groups.setdefault((c.kind, c.reason), []).append(c)
    alone: dict[tuple[str, str], list[str]] = {}  # (kind, run) -> its reasons no other run has, in their words
    lines: list[str | tuple[str, str]] = []
    for (kind, reason), cs in groups.items():
        if len(cs) == 1:
            c = cs[0]
            words = f"{reason}: {c.detail}" if reason and c.detail else reason or c.detail
            if (kind, c.label) not in alone:
                lines.append((kind, c.label))
            alone.setdefault((kind, c.label), []).append("; ".join(w for w in (words, c.advice) if w))
            continue
        details, advice = {c.detail for c in cs}, {c.advice for c in cs}
        shared = (
            [*details, *advice] if len(details) == 1 and len(advice) == 1 else [*advice] if len(advice) == 1 else []
        )
        # each run's own figure, short: its itemisation ('(pip[19776] 36%, ...)') is in its table's notes
        own = ["; ".join(x.split(" (")[0] for x in (c.detail, c.advice) if x and x not in shared) for c in cs]
        entries = [f"{c.label} ({o})" if o else c.label for c, o in zip(cs, own, strict=True)]
        tail = "; ".join(x for x in shared if x)
        head = f"{kind}: {reason}" if reason else kind
        lines.append(f"{head} ({len(cs)} runs: {_runs(entries)})" + (f": {tail}" if tail else ""))
    return [f"{x[0]}: {x[1]}: {'; '.join(alone[x])}" if isinstance(x, tuple) else x for x in lines]


def summary(inp: ReportInput) -> Section:
    section = Section("summary", "Summary")
    recs = inp.records
    counts = {s: sum(1 for r in recs if r.status == s) for s in ("ok", "failed", "skipped")}
    n_sys = len(systems(recs))
    n_runs = len({r.run_id for r in recs})
    section.blocks.append(
        Text(
            f"{len(recs)} records from {n_runs} run{'s' * (n_runs != 1)} on {n_sys} system{'s' * (n_sys != 1)}: "
            f"{counts['ok']} measured, {counts['failed']} failed, {counts['skipped']} skipped."
        )
    )
    best = _best(inp)
    if best:
        section.blocks.append(Bullets(best))
    concerns: list[Concern] = []
    above: dict[str, list[float]] = {}
    for r in newest_first(recs):
        label = f"{r.benchmark} {inp.name(r)}"
        if r.status == "failed":
            concerns.append(Concern("Failed", r.error or "no error recorded", "", "", label))
        elif r.status == "ok":
            concerns += _care(r, label)
        pk = r.metrics.get("pct_of_peak")
        if pk is not None and pk.value > 100:
            above.setdefault(str(peak_of(r).get("source", "unknown")), []).append(pk.value)
    attention = grouped(concerns)
    for source, values in above.items():
        span = (
            f"{fmt.number(min(values), 3)}-{fmt.number(max(values), 3)}%"
            if len(values) > 1
            else (f"{fmt.number(values[0], 3)}%")
        )
        attention.append(
            f"Above the peak: {len(values)} result{'s' * (len(values) > 1)} reached {span} of the peak they are "
            f"divided by ({source}): that peak is below what this machine did (a boost clock above the one read?), "
            "so read % of peak here as relative, not as a ceiling"
        )
    if attention:
        section.blocks.append(Text("Read with care:", "warn"))
        section.blocks.append(
            Bullets(attention[:40] + ([f"... and {len(attention) - 40} more"] * (len(attention) > 40)))
        )
    skipped: dict[str, int] = {}
    for r in recs:
        if r.status == "skipped":
            skipped[r.reason or "no reason recorded"] = skipped.get(r.reason or "no reason recorded", 0) + 1
    if skipped:
        section.blocks.append(Text("Not measured on this machine (skipped):"))
        section.blocks.append(Bullets([f"{n}x: {why}" for why, n in skipped.items()]))
    section.blocks.append(Text(_energy_line(recs), "note"))
    missing = [f"{f.title} ({f.hint})" for f in families() if f.hint and not inp.of_family(f)]
    if missing:
        section.blocks.append(Text("Not in this report: " + "; ".join(missing) + ".", "note"))
    return section


def _energy_line(recs: list[Result]) -> str:
    """One line on energy: which domains were measured, or why none could be (never a TDP in their place)."""
    measured: set[str] = set()
    why: set[str] = set()
    for r in recs:
        for name, d in ((r.conditions.get("energy") or {}).get("domains") or {}).items():
            if d.get("status") == "measured":
                measured.add(name)
            else:
                why.add(f"{name}: {str(d.get('status', '')).removeprefix('unavailable: ')}")
    if measured:
        return (
            f"Energy measured on {', '.join(sorted(measured))} (board/package counters, informative; not MLPerf "
            "Power's wall power)" + (f"; not on {'; '.join(sorted(why))}" if why else "") + "."
        )
    if why:
        return f"Energy: not measured ({'; '.join(sorted(why))}); no estimate is shown in its place."
    return "Energy: these records predate energy metering."
