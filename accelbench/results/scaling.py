"""Scaling over device counts, as the 4x Quadro RTX 8000 tf_cnn_benchmarks article's table (2020): throughput,
speedup over one device, efficiency.

Records of the same workload (every parameter equal but ``nproc``/``nnodes``
and the run's context: threads, seeds, verdict) form one series; speedup is
throughput(N) / throughput(1) - or, for a lower-is-better figure such as the
time to accuracy, time(1) / time(N) - and scaling efficiency is speedup / N.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from accelbench.results.describe import CONTEXT_PARAMS, Describe, plain
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


def _devices(r: Result) -> int:
    return int(r.params.get("nproc", 1)) * int(r.params.get("nnodes", 1))


def scaling_rows(results: list[Result], metric: str = "throughput", describe: Describe = plain) -> list[ScalingRow]:
    """One row per (workload, device count), in series that have at least two device counts."""
    series: dict[str, dict[int, Result]] = {}
    for r in results:
        if r.status != "ok" or metric not in r.metrics:
            continue
        drop = set(SCALE_PARAMS) | CONTEXT_PARAMS
        key = json.dumps([r.benchmark, {k: v for k, v in r.params.items() if k not in drop}], sort_keys=True)
        series.setdefault(key, {})[_devices(r)] = r
    rows = []
    for points in series.values():
        if len(points) < 2:
            continue
        base = points.get(1)
        for n in sorted(points):
            r = points[n]
            m = r.metrics[metric]
            speedup = None
            if base:
                ratio = m.value / base.metrics[metric].value
                speedup = ratio if m.higher_is_better else 1 / ratio
            rows.append(
                ScalingRow(
                    workload=describe(r.benchmark, {**r.params, "nproc": 1, "nnodes": 1}),
                    devices=n,
                    throughput=m,
                    speedup=speedup,
                    efficiency=speedup / n if speedup is not None else None,
                )
            )
    return rows
