"""Kernels (roofline and tables per kernel set) and training throughput (bars, scaling over devices)."""

from __future__ import annotations

from functools import partial

import accelbench.report.charts as charts
from accelbench.families import Family
from accelbench.families.builtin import KERNELS, TRAIN
from accelbench.report.common import (
    MAX_CHARTS,
    ReportInput,
    caveat,
    device_of,
    efficiency_columns,
    family_section,
    figure,
    on_system,
    pct,
    status_cell,
    system_cells,
    systems,
)
from accelbench.report.model import Chart, Section, Table, Text
from accelbench.results import format as fmt
from accelbench.results.details import peak_of
from accelbench.results.record import Result
from accelbench.results.scaling import scaling_rows
from accelbench.system.specs import find_spec


def _roofline(
    inp: ReportInput, family: Family, fp: str, device: str, recs: list[Result], label: str, n: int
) -> Chart | None:
    points = [
        (
            f"{r.benchmark.split('/')[-1]} {r.params.get('precision', '')}".strip(),
            r.metrics["arithmetic_intensity"].value,
            r.metrics["tflops"].value,
        )
        for r in recs
        if "arithmetic_intensity" in r.metrics and "tflops" in r.metrics and r.metrics["arithmetic_intensity"].value > 0
    ]
    if not points:
        return None
    # one roof per precision: a CPU's timed clock differs a little between processes, so records of one run
    # may carry slightly different estimates; the highest is drawn (the bound every point is under)
    highest: dict[tuple[str, str, str], float] = {}
    for r in recs:
        peak = peak_of(r)
        value, unit = peak.get("value"), peak.get("unit")
        if value and unit in ("TFLOPS", "TOPS"):
            key = (str(r.params.get("precision", "?")), str(unit), "estimate" if peak.get("estimated") else "datasheet")
            highest[key] = max(highest.get(key, 0.0), float(value))
    roofs = {f"{prec} peak {value:.3g} {unit} ({how})": value for (prec, unit, how), value in highest.items()}
    bandwidth = None
    stream = [  # the family's STREAM records: those that measured memory bandwidth
        r
        for r in inp.of_family(family, ok=True)
        if r.fingerprint == fp and device_of(r) == device and "gbps" in r.metrics
    ]
    if stream:
        best = max(r.metrics["gbps"].value for r in stream)
        bandwidth = (f"memory {best:.3g} GB/s (measured, STREAM)", best)
    elif (spec := find_spec(device)) is not None and spec.mem_bw_gbs:
        bandwidth = (f"memory {spec.mem_bw_gbs:g} GB/s (datasheet)", spec.mem_bw_gbs)
    return Chart(
        f"roofline-{n}",
        f"Roofline: {device} on {label}",
        f"Achieved TFLOPS (TOPS for int8) of {len(points)} kernels against their arithmetic intensity, "
        "under the compute peak" + (" and the memory-bandwidth slope" if bandwidth else ""),
        partial(
            charts.draw_roofline, points=points, roofs=sorted(roofs.items(), key=lambda kv: -kv[1]), bandwidth=bandwidth
        ),
        size=(7.0, 4.2),
    )


def kernel_headlines(inp: ReportInput, recs: list[Result]) -> list[str]:
    """The summary's line on kernels: the one nearest its peak."""
    kern = [r for r in recs if "pct_of_peak" in r.metrics]
    if not kern:
        return []
    top = max(kern, key=lambda r: r.metrics["pct_of_peak"].value)
    return [
        f"Kernels: the best reached {fmt.number(top.metrics['pct_of_peak'].value, 3)}% of peak "
        f"({top.benchmark.split('/')[-1]} {inp.name(top)}: {figure(top.primary)}){on_system(inp, top)}."
    ]


def kernels(inp: ReportInput, family: Family = KERNELS) -> Section | None:
    opened = family_section(
        inp,
        family,
        "kernels",
        "Kernels",
        "DeepBench-style kernels timed on the device. % of peak divides the achieved rate by the device's peak "
        "for that precision (datasheet for a GPU, an estimate from cores, clock and vector width for a CPU).",
    )
    if opened is None:
        return None
    recs, labels, section = opened
    multi = len(labels) > 1
    n = 0
    for fp, label in labels.items():
        devices = sorted({device_of(r) for r in recs if r.fingerprint == fp and r.status == "ok"})
        for device in devices:
            mine = [r for r in recs if r.fingerprint == fp and r.status == "ok" and device_of(r) == device]
            if n < MAX_CHARTS and (chart := _roofline(inp, family, fp, device, mine, label, n)) is not None:
                section.blocks.append(chart)
                n += 1
    for bench in sorted({r.benchmark for r in recs}):
        mine = [r for r in recs if r.benchmark == bench]
        rows = []
        for r in mine:
            est = bool(peak_of(r).get("estimated"))
            sec = r.metrics.get("seconds")
            rows.append(
                system_cells(labels, r, multi)
                + [
                    inp.name(r),
                    status_cell(r),
                    fmt.seconds(sec.value) if sec else "",
                    figure(r.primary) if r.status == "ok" else (r.error or r.reason or ""),
                    pct(r.metrics.get("pct_of_peak"), est),
                    "; ".join(r.warnings),
                ]
            )
        cols = (["system"] if multi else []) + ["workload", "status", "time per call", "result", "% of peak", "notes"]
        sub = Section(f"kernels-{bench.split('/')[-1]}", bench.split("/")[-1])
        sub.blocks.append(Table(cols, rows, numeric=frozenset({len(cols) - 4, len(cols) - 3, len(cols) - 2})))
        section.blocks.append(sub)
    return section


def _bar_label(inp: ReportInput, r: Result, multi: dict[str, str] | None) -> str:
    words = inp.name(r).split()
    text = " ".join(w for w in words if w != str(r.params.get("model")))
    return f"{multi[r.fingerprint]}: {text}" if multi else text


def _run_hint(r: Result) -> str:
    """'run 20261122-200150-1b3b': what tells apart two runs of one workload on one machine, whose names and
    systems are the same (the id 'accelbench compare' takes)."""
    return f"run {r.run_id}" if r.run_id else ""


def _bars(inp: ReportInput, recs: list[Result], multi: dict[str, str] | None) -> list[charts.Bar]:
    """One bar per record, each under its own label: two runs of one workload would otherwise share one
    and read as a single result drawn twice."""
    labels = charts.distinct(
        [_bar_label(inp, r, multi) for r in recs],
        [_run_hint(r) for r in recs],
        [r.started_at[:19].replace("T", " ") for r in recs],  # repeats within one run: their start
    )
    out = []
    for label, r in zip(labels, recs, strict=True):
        m = r.primary
        assert m is not None
        out.append(charts.Bar(label, m.value, m.ci95))
    return out


#: what makes two training runs one workload, whose best a summary line may name: the model at one size (a tiny
#: preset at 0.25% MFU is not the best of a full-width slice at 46%), one depth, one sequence, LoRA or not, one
#: precision (an fp32 run is not beaten by its own bf16 run: they are two lines a buyer reads side by side)
WORKLOAD_PARAMS = ("model", "scale", "layers", "seq_len", "lora", "precision")


def like_workload(r: Result) -> str:
    return repr([r.params.get(k) for k in WORKLOAD_PARAMS])


def _standing(r: Result) -> tuple[bool, float]:
    """How a record with a figure ranks among like ones: one fit to compare first, then the larger figure."""
    return not caveat(r), r.primary.value if r.primary else float("-inf")


def training_headlines(inp: ReportInput, recs: list[Result]) -> list[str]:
    """The summary's lines on training: each workload's best throughput (a model at one size, depth and
    sequence), of the figures fit to compare where it has any (a contended or noisy best is no best), said with
    care otherwise."""
    by_model: dict[str, Result] = {}
    for r in recs:
        key = like_workload(r)
        best = by_model.get(key)
        if r.primary and (best is None or _standing(r) > _standing(best)):
            by_model[key] = r
    return [
        f"Training {r.params.get('model')}: {figure(r.primary)} at best ({inp.name(r)}){on_system(inp, r)}"
        + (f", MFU {pct(r.metrics['mfu'])}" if "mfu" in r.metrics else "")
        + f"{caveat(r)}."
        for r in by_model.values()
    ]


def training(inp: ReportInput, family: Family = TRAIN) -> Section | None:
    opened = family_section(
        inp,
        family,
        "training",
        "Training throughput",
        "Samples per second on synthetic data after warm-up, from timed windows (decoder language models in "
        "tokens/s, their MFU by torchtitan's convention: 6 x non-embedding matmul parameters + the attention "
        "term per token, over the dense peak; in brackets with the attention halved for the causal mask); error "
        "bars are 95% confidence intervals of the windows' rates. Models in different units are drawn on "
        "separate axes.",
    )
    if opened is None:
        return None
    recs, labels, section = opened
    multi = labels if len(labels) > 1 else None
    ok = [r for r in recs if r.status == "ok" and r.primary is not None]
    panels: dict[tuple[str, str], list[Result]] = {}
    for r in sorted(ok, key=lambda r: (str(r.params.get("model")), r.started_at)):
        assert r.primary is not None
        panels.setdefault((str(r.params.get("model")), r.primary.unit), []).append(r)
    items = [(model, unit, _bars(inp, rs[-12:], multi)) for (model, unit), rs in panels.items()][:12]
    if items:
        height = sum(0.45 + 0.3 * len(bars) for _, _, bars in items)
        section.blocks.append(
            Chart(
                "train-throughput",
                "Training throughput per model",
                f"Throughput with 95% intervals for {len(ok)} training runs of {len(panels)} models",
                partial(charts.draw_bar_panels, panels=items),
                size=(8.0, 0.6 + height),
            )
        )
    rows_ = []
    extra = efficiency_columns(recs)
    for r in recs:
        mem = r.metrics.get("peak_memory_bytes")
        est = bool(peak_of(r).get("estimated"))
        rows_.append(
            system_cells(labels, r, bool(multi))
            + [
                inp.name(r),
                status_cell(r),
                figure(r.primary) if r.status == "ok" else (r.error or r.reason or ""),
                figure(r.metrics.get("throughput_per_device")) if _devices(r) > 1 else "",
                figure(r.metrics.get("tflops")),
                _of_peak(r, est),
                fmt.bytes_(mem.value) if mem else "",
                *(cell(r) for _, cell in extra),
                "; ".join(r.warnings),
            ]
        )
    cols = (["system"] if multi else []) + [
        "workload",
        "status",
        "throughput",
        "per device",
        "model TFLOPS",
        "% of peak (MFU)",
        "peak memory",
        *(name for name, _ in extra),
        "notes",
    ]
    section.blocks.append(Table(cols, rows_, numeric=frozenset(range(len(cols) - 6, len(cols) - 1))))
    section.blocks.extend(_scaling(inp, ok))
    return section


def _devices(r: Result) -> int:
    return int(r.params.get("nproc", 1)) * int(r.params.get("nnodes", 1))


def _of_peak(r: Result, estimated: bool) -> str:
    """The model's FLOP rate over the peak: counted FLOPs (pct_of_peak), or a decoder's MFU by torchtitan's
    convention with the causal-halved figure beside it."""
    mfu = r.metrics.get("mfu")
    if mfu is None:
        return pct(r.metrics.get("pct_of_peak"), estimated)
    causal = r.metrics.get("mfu_causal")
    return pct(mfu, estimated) + (f" ({pct(causal)} causal)" if causal else "")


def _scaling(inp: ReportInput, ok: list[Result]) -> list[Section]:
    rows = []
    for fp, label in systems(ok).items():
        for row in scaling_rows([r for r in ok if r.fingerprint == fp], describe=inp.describe):
            rows.append((label, row))
    if not rows:
        return []
    multi = len({label for label, _ in rows}) > 1
    series: dict[str, list[tuple[int, float]]] = {}
    for label, row in rows:
        if row.speedup is not None:
            series.setdefault(f"{label}: {row.workload}" if multi else row.workload, []).append(
                (row.devices, row.speedup)
            )
    sub = Section("scaling", "Scaling over devices")
    sub.blocks.append(
        Text(
            "Speedup is the throughput on N devices over the throughput on one; efficiency is speedup / N "
            "(1.0 is linear scaling, the dashed line).",
            "note",
        )
    )
    if series:
        sub.blocks.append(
            Chart(
                "train-scaling",
                "Scaling over devices",
                f"Speedup against device count for {len(series)} workloads, with the ideal linear line",
                partial(charts.draw_scaling, series=list(series.items())[:MAX_CHARTS]),
            )
        )
    notes = any(row.note for _, row in rows)
    sub.blocks.append(
        Table(
            (["system"] if multi else [])
            + ["workload", "devices", "throughput", "speedup", "efficiency"]
            + (["note"] if notes else []),
            [
                ([label] if multi else [])
                + [
                    row.workload,
                    str(row.devices),
                    figure(row.throughput),
                    f"{row.speedup:.2f}x" if row.speedup is not None else "",
                    f"{row.efficiency:.0%}" if row.efficiency is not None else "",
                ]
                + ([row.note] if notes else [])
                for label, row in rows
            ],
        )
    )
    return [sub]
