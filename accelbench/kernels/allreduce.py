"""All-reduce bandwidth over N processes launched by torchrun: NCCL on GPUs, gloo on CPUs.

Reported the way nccl-tests does: algorithm bandwidth = bytes / time, and bus
bandwidth = algbw * 2 * (n - 1) / n, the rate each link must sustain in a ring
all-reduce, which is comparable across process counts and with the hardware's
link speed (NVLink, PCIe, network).
"""

from __future__ import annotations

import uuid
from typing import Iterator

from accelbench.errors import UsageError
from accelbench.kernels.common import prepare
from accelbench.kernels.specs import AllreduceParams
from accelbench.launch.torchrun import check_nproc, run_torchrun
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.stats import Measurement
from accelbench.params import parse_size
from accelbench.registry import RunContext
from accelbench.results.record import Metric, Result

NAME = "kernels/allreduce"


def bus_factor(nproc: int) -> float:
    """Ring all-reduce: each byte crosses 2 * (n - 1) / n links."""
    return 2.0 * (nproc - 1) / nproc


def _rates(m: Measurement, nbytes: int, nproc: int) -> dict[str, Metric]:
    lo, hi = m.ci95
    alg = nbytes / m.median / 1e9
    alg_ci = (nbytes / hi / 1e9, nbytes / lo / 1e9) if lo > 0 else None
    f = bus_factor(nproc)
    bus_ci = (alg_ci[0] * f, alg_ci[1] * f) if alg_ci else None
    return {
        "seconds": Metric(m.median, "s", False, (lo, hi), m.n, m.summary()),
        "algbw_gbps": Metric(alg, "GB/s", True, alg_ci, m.n),
        "busbw_gbps": Metric(alg * f, "GB/s", True, bus_ci, m.n),
    }


def run(params: AllreduceParams, ctx: RunContext) -> Iterator[Result]:
    import json

    device, threads = prepare(params)
    backend = params.backend if params.backend != "auto" else ("nccl" if device.type == "cuda" else "gloo")
    if backend == "nccl" and device.type != "cuda":
        raise UsageError("the nccl backend needs CUDA devices; use --backend gloo on a CPU")
    try:
        check_nproc(params.nproc, device.type)
    except UsageError as exc:  # in a suite, a machine with fewer devices skips this entry
        yield Result(NAME, params.to_dict() | {"device": device.type}, status="skipped", reason=str(exc))
        return
    sizes = [parse_size(s) for s in params.sizes.split(",")]
    out = ctx.log_dir / f"allreduce-{uuid.uuid4().hex[:8]}.json"
    args = [
        "--sizes", ",".join(map(str, sizes)),
        "--backend", backend,
        "--device", device.type,
        "--threads", str(params.threads or 1),
        "--min-reps", str(params.min_reps),
        "--min-time", str(params.min_time),
        "--timeout", str(max(60.0, params.max_time * 6)),
        "--out", str(out),
    ]  # fmt: skip
    ctx.progress(f"torchrun: {params.nproc} x {backend}")
    with ConditionsMonitor(threads) as monitor:
        run_torchrun("accelbench.kernels.allreduce_rank", args, params.nproc, ctx.log_dir / "allreduce-torchrun.log",
                     timeout=120 + len(sizes) * (params.max_time + 30))  # fmt: skip
    data = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    conditions = monitor.conditions.to_dict()
    base = params.to_dict() | {"device": device.type, "threads": params.threads or 1, "backend": backend}
    for item in data["results"]:
        record = base | {"size": item["bytes"]}
        if not item["correct"]:
            yield Result(NAME, record, status="failed", error="wrong result: the all-reduced sum is not n(n+1)/2")
            continue
        m = Measurement(tuple(item["samples"]), clock="cuda_event" if device.type == "cuda" else "perf_counter_ns")
        yield Result(
            NAME,
            record,
            metrics=_rates(m, item["bytes"], data["world_size"]),
            primary_metric="busbw_gbps",
            warnings=[w for w in [m.noise_warning(), *conditions["warnings"]] if w],
            conditions=conditions,
            samples=list(m.samples),
            details={"world_size": data["world_size"], "bus_factor": bus_factor(data["world_size"])},
        )
