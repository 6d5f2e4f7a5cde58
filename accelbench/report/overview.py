"""The first things a reader needs: what was measured where (machines, runs) and the verdict in words."""

from __future__ import annotations

from accelbench.families import families
from accelbench.report.common import ReportInput, hook, newest_first, systems
from accelbench.report.model import Bullets, Section, Table, Text
from accelbench.results import format as fmt
from accelbench.results.record import Result
from accelbench.system.specs import find_spec


def machines(inp: ReportInput) -> Section | None:
    if not inp.records:
        return None
    labels = systems(inp.records)
    profiles: dict[str, dict] = {}
    for r in inp.records:
        profiles.setdefault(r.fingerprint, r.system.get("profile") or {})
    section = Section("machines", "Machines")
    rows = []
    for fp, p in profiles.items():
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
        rows.append(
            [
                labels[fp],
                fp,
                p.get("hostname") or "",
                f"{cpu.get('model', '')}: {cpu.get('physical_cores', '?')} cores / "
                f"{cpu.get('logical_cores', '?')} threads{clock}{flags}",
                fmt.bytes_((p.get("memory") or {}).get("total_bytes") or 0),
                f"{os_.get('name', '')} (kernel {os_.get('kernel', '')})",
                software,
            ]
        )
    section.blocks.append(
        Table(
            ["system", "fingerprint", "host", "CPU", "memory", "OS", "software"],
            rows,
            caption="The fingerprint hashes the hardware and the software stack: figures are compared only "
            "between records that share one, or side by side in Comparisons.",
        )
    )
    accs = []
    topologies = []
    for fp, p in profiles.items():
        for a in p.get("accelerators") or []:
            spec = find_spec(str(a.get("name", "")))
            peaks = ", ".join(f"{k} {v:g}" for k, v in spec.peaks.items()) if spec else "not in the spec table"
            accs.append(
                [
                    labels[fp],
                    str(a.get("index", "")),
                    str(a.get("name", "")),
                    fmt.bytes_(a.get("memory_bytes") or 0),
                    str(a.get("compute_capability", "")),
                    str(a.get("driver", "")),
                    peaks,
                    f"{spec.mem_bw_gbs:g} GB/s" if spec and spec.mem_bw_gbs else "",
                    spec.source if spec else "",
                ]
            )
            if a.get("topology"):
                topologies.append(f"{labels[fp]}:\n{a['topology']}")
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
                accs,
                caption="Peaks come from the shipped spec table (datasheets), not from a measurement.",
            )
        )
    for t in topologies:
        section.blocks.append(Text(t, "pre"))
    if inp.runs:
        section.blocks.append(
            Table(
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
        )
    return section


def _best(inp: ReportInput) -> list[str]:
    """The headline figure per workload family: what a manager asks first (each family's own lines, in the
    report's order of families)."""
    lines: list[str] = []
    for family in families():
        if family.headline is not None and (recs := inp.of_family(family, ok=True)):
            lines += hook(family.headline)(inp, recs)
    return lines


def _care(r: Result, label: str) -> list[str]:
    """What makes one figure unfit to compare: INVALID, contended, noisy, throttled (each said, none hiding another)."""
    out = []
    if r.valid is False:
        why = r.details.get("invalid_reasons") or ["LoadGen's verdict"]
        out.append(f"INVALID: {label}: {'; '.join(why)}")
    for w in r.warnings:
        for prefix, word in (("contended", "Contended"), ("noisy", "Noisy"), ("GPU throttled", "Throttled")):
            if w.startswith(prefix):
                out.append(f"{word}: {label}: {w.removeprefix(prefix).lstrip(': ')}")
    return out


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
    attention = []
    above: dict[str, list[float]] = {}
    for r in newest_first(recs):
        label = f"{r.benchmark} {inp.name(r)}"
        if r.status == "failed":
            attention.append(f"Failed: {label}: {r.error or 'no error recorded'}")
        elif r.status == "ok":
            attention += _care(r, label)
        pk = r.metrics.get("pct_of_peak")
        if pk is not None and pk.value > 100:
            above.setdefault(str((r.details.get("peak") or {}).get("source", "unknown")), []).append(pk.value)
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
