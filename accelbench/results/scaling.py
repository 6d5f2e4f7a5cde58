"""Scaling over device counts, as the 4x Quadro RTX 8000 tf_cnn_benchmarks article's table (2020): throughput,
speedup over one device, efficiency.

Records equal in every parameter but ``nproc``/``nnodes`` and the run's context form one series; speedup is
throughput(N) / throughput(1) (time(1) / time(N) for a lower-is-better figure) and efficiency speedup / N. A point
or base the judge sets aside gets no speedup, with the reason, and one the significance rule cannot tell from one
device's is shown as the best estimate, said to be within noise."""

from __future__ import annotations

import json
from dataclasses import dataclass

from accelbench.results.describe import CONTEXT_PARAMS, Describe, plain
from accelbench.results.judge import concerns, kind, significance
from accelbench.results.record import Metric, Result

#: what changes with the device count itself: a decoder's sharding is resolved per count (none on one device, FSDP2
#: over several) and its global batch in tokens grows with the ranks
SCALE_PARAMS = (
    "nproc", "nnodes", "global_batch_size", "global_batch_tokens", "sharding", "threads", "node_rank", "rdzv_endpoint",
)  # fmt: skip


@dataclass(frozen=True)
class ScalingRow:
    workload: str
    devices: int
    throughput: Metric
    speedup: float | None
    efficiency: float | None
    #: why the speedup is withheld or weak ("not computed: noisy at 2 devices"), empty where it stands
    note: str = ""


def _devices(r: Result) -> int:
    return int(r.params.get("nproc", 1)) * int(r.params.get("nnodes", 1))


def _biased(r: Result, metric: str) -> list[str]:
    """What keeps ``r``'s figure out of a ratio (contended, noisy, INVALID...), by kind: a missing interval does
    not (a time to accuracy has none, and its ratio still reads)."""
    return [kind(c) for c in concerns(r)]


def _counts(counts: list[int]) -> str:
    """'1 device', '2 devices', '1 and 2 devices'."""
    return " and ".join(map(str, counts)) + (" device" if counts == [1] else " devices")


def _within_noise(base: Result, r: Result, metric: str) -> str:
    """'within noise: ...' where the one significance rule cannot tell the two figures apart; '' where it can, or
    where neither has an interval nor samples to test (a time to accuracy: the ratio reads on its own)."""
    test = significance([base], [r], metric)
    if test.apart or test.basis == "runs":
        return ""
    return "within noise: " + ("the 95% intervals overlap" if test.basis == "intervals" else test.evidence)


def scaling_rows(results: list[Result], metric: str = "throughput", describe: Describe = plain) -> list[ScalingRow]:
    """One row per (workload, device count), in series that have at least two device counts."""
    series: dict[str, dict[int, Result]] = {}
    for r in results:
        if r.status != "ok" or metric not in r.metrics:
            continue
        drop = set(SCALE_PARAMS) | CONTEXT_PARAMS
        key = json.dumps([r.benchmark, {k: v for k, v in r.params.items() if k not in drop}], sort_keys=True)
        points = series.setdefault(key, {})
        held = points.get(_devices(r))
        if held is None or not _biased(r, metric) or _biased(held, metric):  # the latest fit run stands
            points[_devices(r)] = r
    rows = []
    for points in series.values():
        if len(points) < 2:
            continue
        base = points.get(1)
        for n in sorted(points):
            r = points[n]
            m = r.metrics[metric]
            speedup, note = None, ""
            if base:
                b = base.metrics[metric]
                ratio = m.value / b.value
                speedup = ratio if m.higher_is_better else 1 / ratio
                why: dict[str, list[int]] = {}
                for count, point in sorted({1: base, n: r}.items()):
                    for w in _biased(point, metric):
                        why.setdefault(w, []).append(count)
                if why:
                    said = "; ".join(f"{w} at {_counts(counts)}" for w, counts in why.items())
                    speedup, note = None, f"not computed: {said}"
                elif base is not r:
                    note = _within_noise(base, r, metric)
            rows.append(
                ScalingRow(
                    workload=describe(r.benchmark, {**r.params, "nproc": 1, "nnodes": 1}),
                    devices=n,
                    throughput=m,
                    speedup=speedup,
                    efficiency=speedup / n if speedup is not None else None,
                    note=note,
                )
            )
    return rows
