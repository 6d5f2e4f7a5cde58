"""All-reduce bandwidth over N processes launched by torchrun: NCCL on GPUs, gloo on CPUs.

Reported the way nccl-tests does: algorithm bandwidth = bytes / time, and bus
bandwidth = algbw * 2 * (n - 1) / n, the rate each link must sustain in a ring
all-reduce, which is comparable across process counts and with the hardware's
link speed (NVLink, PCIe, network).
"""

from __future__ import annotations

from typing import Any, Iterator

from accelbench.devices.kind import kind_of
from accelbench.errors import UsageError
from accelbench.families import benchmark_of
from accelbench.kernels.common import KernelDetails
from accelbench.kernels.specs import AllreduceParams
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext, prepare
from accelbench.kit.ranks import Nodes, node_gpus, run_ranks
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.stats import Measurement
from accelbench.params import parse_size
from accelbench.results.record import Metric, Result


def bus_factor(nproc: int) -> float:
    """Ring all-reduce: each byte crosses 2 * (n - 1) / n links."""
    return 2.0 * (nproc - 1) / nproc


def _rates(m: Measurement, nbytes: int, nproc: int) -> dict[str, Metric]:
    alg = fig.rate(nbytes, m, "GB/s", 1e9)
    return {"seconds": fig.seconds(m), "algbw_gbps": alg, "busbw_gbps": fig.scaled(alg, bus_factor(nproc))}


def run(params: AllreduceParams, ctx: RunContext) -> Iterator[Result]:
    prep = prepare(params)
    device = prep.device
    kind = kind_of(device)
    backend = params.backend if params.backend != "auto" else kind.dist_backend
    if backend == "nccl" and kind.dist_backend != "nccl":
        raise UsageError(
            f"the nccl backend needs NVIDIA or AMD GPUs, not {kind.name}; use --backend {kind.dist_backend}"
        )
    sizes = [parse_size(s) for s in params.sizes.split(",")]
    payload: dict[str, Any] = {
        "params": {"device": kind.name, "threads": params.threads or 1},
        "sizes": sizes,
        "backend": backend,
        "min_reps": params.min_reps,
        "min_time": params.min_time,
    }
    base = params.to_dict() | {"device": kind.name, "threads": params.threads or 1, "backend": backend}
    gpus = node_gpus(params.nproc, device.type, params.to_dict() | {"device": kind.name, "backend": backend})
    with ConditionsMonitor(prep.threads, gpus=gpus) as monitor:
        data = run_ranks(
            "accelbench.kernels.allreduce_rank",
            payload,
            ctx,
            nproc=params.nproc,
            device_type=device.type,
            budget=120 + len(sizes) * (params.max_time + 30),
            rank_timeout=max(60.0, params.max_time * 6),
            nodes=Nodes.of(params),
            record=base,  # a dead rank: the failed record every family's ranks give
        )
    conditions = monitor.conditions.to_dict()
    for item in data["results"]:
        record = base | {"size": item["bytes"]}
        if not item["correct"]:
            yield Result.failed(benchmark_of(params), record, "wrong result: the all-reduced sum is not n(n+1)/2")
            continue
        m = Measurement(tuple(item["samples"]), calls_per_sample=item["burst"], clock=data["clock"])
        yield Result(
            benchmark_of(params),
            record,
            metrics=_rates(m, item["bytes"], data["world_size"]),
            primary_metric="busbw_gbps",
            concerns=fig.concerns_of(m, conditions),
            conditions=conditions,
            samples=list(m.samples),
            details=KernelDetails(
                world_size=data["world_size"], bus_factor=bus_factor(data["world_size"]), calls_per_sample=item["burst"]
            ),
        )
