"""Synthetic against real data, as the TPUv2 vs V100 study's table: the same training on both, the ratio, the
input-bound share.

Records that differ only in ``data`` (and the pipeline's own settings) pair up, per device count: what
the real input pipeline cost this machine is real / synthetic, and how much of each step waited for data
is the record's ``input_wait_share``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from accelbench.results.describe import CONTEXT_PARAMS, Describe, plain
from accelbench.results.record import Metric, Result

#: what differs between the synthetic and the real run of one workload
DATA_PARAMS = ("data", "data_dir", "workers", "data_only")


@dataclass(frozen=True)
class DataRow:
    workload: str
    devices: int
    synthetic: Metric
    real: Metric
    ratio: float
    wait_share: Metric | None
    workers: int


def data_rows(results: list[Result], describe: Describe = plain) -> list[DataRow]:
    """One row per workload and device count measured on both synthetic and real data."""
    pairs: dict[str, dict[str, Result]] = {}
    for r in results:
        if r.status != "ok" or "throughput" not in r.metrics or r.params.get("data_only"):
            continue
        drop = set(DATA_PARAMS) | CONTEXT_PARAMS
        key = json.dumps([r.benchmark, {k: v for k, v in r.params.items() if k not in drop}], sort_keys=True)
        pairs.setdefault(key, {})[str(r.params.get("data", "synthetic"))] = r
    rows = []
    for pair in pairs.values():
        if {"synthetic", "real"} <= set(pair):
            syn, real = pair["synthetic"], pair["real"]
            rows.append(
                DataRow(
                    workload=describe(syn.benchmark, syn.params),
                    devices=int(syn.params.get("nproc", 1)) * int(syn.params.get("nnodes", 1)),
                    synthetic=syn.metrics["throughput"],
                    real=real.metrics["throughput"],
                    ratio=real.metrics["throughput"].value / syn.metrics["throughput"].value,
                    wait_share=real.metrics.get("input_wait_share"),
                    workers=int(real.params.get("workers", 0)),
                )
            )
    return sorted(rows, key=lambda r: (r.workload, r.devices))
