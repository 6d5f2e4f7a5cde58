"""The one torchrun launcher: N ranks per node run a module, and the parent gets their report.

:func:`run_ranks` checks the devices, starts ``torch.distributed.run`` with a JSON payload and waits within a
budget for rank 0's report; :func:`rank_main` joins the group, runs the family's body and hands the report back.
A dead rank makes torchrun stop the others; a hung one is ended by the collective's timeout, then the budget.
The c10d rendezvous numbers nodes by arrival, not ``--node-rank``, so rank 0's report is sent to every node and
the invocation started with ``--node-rank 0`` records it."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from accelbench.devices import resolve_device
from accelbench.devices.kind import kind_of
from accelbench.errors import BenchmarkFailed, BenchmarkSkipped, RecordedElsewhere, UsageError
from accelbench.kit.context import Progress, RunContext, quiet

if TYPE_CHECKING:
    import torch


def nproc_reason(nproc: int, device_type: str, nnodes: int = 1) -> str | None:
    """Why this machine cannot start ``nproc`` ranks per node (one device each) on ``nnodes`` nodes, or None."""
    kind = kind_of(device_type)
    if nproc * nnodes > 1 and kind.no_ranks:
        return f"--nproc {nproc} --nnodes {nnodes} on {kind.name}: {kind.no_ranks}"
    if kind.accelerator:
        have = kind.count()
        if nproc > have:
            return f"--nproc {nproc} needs {nproc} {kind.name} devices; this machine has {have}"
        return None
    have = os.cpu_count() or 1
    if nproc > have:
        return f"--nproc {nproc} exceeds the {have} CPU cores here; use --nproc {have} or fewer"
    return None


def node_gpus(nproc: int, device_type: str, record: dict[str, Any] | None = None) -> list[int]:
    """The GPUs this node's ranks take, one each, for the energy meter; skipped before anything opens one that is
    not there (NVML refuses an index past the last GPU)."""
    import torch

    reason = nproc_reason(nproc, device_type)
    if reason:
        raise BenchmarkSkipped(reason, record)
    kind = kind_of(device_type)
    found = (kind.monitored(torch.device(kind.torch_type, i)) for i in range(nproc)) if kind.accelerator else ()
    return [i for i in found if i is not None]


def check_nproc(nproc: int, device_type: str, nnodes: int = 1) -> None:
    """Bad input on the command line (exit 2) where a suite would skip: more ranks than devices."""
    reason = nproc_reason(nproc, device_type, nnodes)
    if reason:
        raise UsageError(reason)


@dataclass(frozen=True)
class Nodes:
    """Where the ranks run: one node (the default) or several meeting at a rendezvous endpoint."""

    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str = ""

    @classmethod
    def of(cls, params: Any) -> "Nodes":
        """The nodes a family's parameters ask for (see :class:`accelbench.params.NodesParams`)."""
        return cls(params.nnodes, params.node_rank, params.rdzv_endpoint)

    def torchrun_args(self) -> list[str]:
        if self.nnodes == 1:
            return ["--standalone", "--nnodes=1"]
        return [
            f"--nnodes={self.nnodes}",
            f"--node-rank={self.node_rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={self.rdzv_endpoint}",
            "--rdzv-id=accelbench",
        ]


def run_ranks(
    module: str,
    payload: dict[str, Any],
    ctx: RunContext,
    *,
    nproc: int,
    device_type: str,
    budget: float,
    nodes: Nodes = Nodes(),
    rank_timeout: float = 300.0,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``python -m module`` on ``nproc`` ranks per node and return rank 0's report.

    Raises the skip exception when the machine lacks the devices, :class:`BenchmarkFailed` with the
    cause when a rank fails or the budget runs out (every family's dead rank is the same failed record:
    ``record``, the family's parameters as resolved so far, and the torchrun log in ``details.log``), and
    :class:`RecordedElsewhere` on a node other than ``--node-rank 0`` once the report has arrived.
    """
    import time

    reason = nproc_reason(nproc, device_type, nodes.nnodes)
    if reason:
        raise BenchmarkSkipped(reason, record)
    tag = f"{module.rsplit('.', 1)[-1]}-{uuid.uuid4().hex[:8]}"
    out, log = ctx.log_dir / f"{tag}.json", ctx.log_dir / f"{tag}.log"
    cmd = [sys.executable, "-m", "torch.distributed.run", *nodes.torchrun_args()]
    cmd += [f"--nproc-per-node={nproc}", "--max-restarts=0", "-m", module]
    cmd += ["--payload", json.dumps(payload), "--out", str(out), "--log-dir", str(ctx.log_dir)]
    cmd += ["--timeout", str(rank_timeout)]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    where = f" x {nodes.nnodes} nodes" if nodes.nnodes > 1 else ""
    ctx.progress(f"torchrun: {nproc} rank(s){where}")
    started = time.monotonic()
    with log.open("ab") as sink:
        try:
            proc = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, timeout=budget)
        except subprocess.TimeoutExpired:
            raise BenchmarkFailed(
                f"a rank hung: torchrun did not finish within {budget:g} s (see {log})", record, {"log": str(log)}
            ) from None
    if proc.returncode != 0:
        raise BenchmarkFailed(
            f"a rank failed, so the run was stopped: torchrun exited with status {proc.returncode} "
            f"after {time.monotonic() - started:.0f} s: {failure_cause(log.read_text(errors='replace'))[:300]} "
            f"(see {log})",
            record,
            {"log": str(log)},
        )
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    if nodes.node_rank != 0:
        raise RecordedElsewhere(
            f"node {nodes.node_rank}: the ranks finished; the invocation started with --node-rank 0 records the result"
        )
    return report


def failure_cause(log: str) -> str:
    """The line of a failed torchrun job's log that says why: the rank torchrun names as the root cause, with the
    exception it raised or else its exit code (a rank that died without a word; the others' errors, "connection
    closed by peer", are only its consequence); without that section the last exception a rank raised, else the
    log's last line."""
    import re

    raised: dict[str, str] = {}
    for rank, text in re.findall(r"^\[rank(\d+)\]:\s*((?:[\w.]+\.)?\w+(?:Error|Exception)\b.*)$", log, re.MULTILINE):
        raised[rank] = text.strip()
    root = log.rpartition("Root Cause")[2] if "Root Cause" in log else ""
    rank = re.search(r"^\s*rank\s*:\s*(\d+)", root, re.MULTILINE)
    code = re.search(r"^\s*exitcode\s*:\s*(-?\d+)", root, re.MULTILINE)
    if rank and rank.group(1) in raised:
        return f"rank {rank.group(1)}: {raised[rank.group(1)]}"
    if rank and code:
        n = int(code.group(1))
        return f"rank {rank.group(1)} " + (f"was killed by signal {-n}" if n < 0 else f"exited with code {n}")
    if raised:
        last = list(raised)[-1]
        return f"rank {last}: {raised[last]}"
    lines = [line for line in log.strip().splitlines() if line.strip("=- ")]
    return lines[-1] if lines else ""


@dataclass
class Rank:
    """One rank's place in the job, as the body sees it."""

    device: "torch.device"
    local_rank: int
    rank: int
    world: int
    log_dir: Path
    progress: Progress


def start_rank(device: str, threads: int | None, timeout_s: float, backend: str = "auto") -> tuple[Any, int, int, int]:
    """Join the process group torchrun set up: (this rank's device, local rank, rank, world size).

    One GPU per local rank over NCCL; on CPUs gloo, with the cores split between the node's
    ranks unless ``threads`` says otherwise.
    """
    import datetime

    import torch
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    kind = kind_of(resolve_device(device.split(":")[0]))  # the kind asked for (auto: the first accelerator)
    if kind.accelerator:  # one device per local rank
        dev = kind.resolve(local_rank)
        kind.make_current(dev)
    else:
        dev = torch.device("cpu")
        torch.set_num_threads(threads or max(1, (os.cpu_count() or 1) // int(os.environ["LOCAL_WORLD_SIZE"])))
    if backend == "auto":
        backend = kind.dist_backend
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return dev, local_rank, dist.get_rank(), dist.get_world_size()


def _hand_back(rank: Rank, out: str, report: object) -> None:
    """Send rank 0's report to every node; each node's first rank writes it for its parent."""
    import torch.distributed as dist

    box = [report]
    dist.broadcast_object_list(box, src=0)
    if rank.local_rank == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(box[0], f)
    dist.barrier()
    dist.destroy_process_group()


def rank_main(
    body: Callable[[dict[str, Any], Rank], object], backend: Callable[[dict[str, Any]], str] | None = None
) -> None:
    """A rank module's ``__main__``: parse the launcher's arguments, join the group, run ``body``, report.

    ``body`` returns the report on rank 0 (other ranks' return values are ignored).
    The process leaves without interpreter teardown: gloo's threads can abort a finished
    process in C++ destructors at exit ("terminate called without an active exception").
    """
    p = argparse.ArgumentParser()
    p.add_argument("--payload", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args()
    payload = json.loads(args.payload)
    params = payload.get("params", {})
    device, local_rank, rank, world = start_rank(
        params.get("device", "auto"), params.get("threads"), args.timeout, backend(payload) if backend else "auto"
    )
    talk: Progress = (lambda m, left=None: print(m, flush=True)) if rank == 0 else quiet
    me = Rank(device, local_rank, rank, world, Path(args.log_dir), talk)
    report = body(payload, me)
    _hand_back(me, args.out, report if rank == 0 else None)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


__all__ = ["Nodes", "Rank", "check_nproc", "node_gpus", "nproc_reason", "rank_main", "run_ranks", "start_rank"]
