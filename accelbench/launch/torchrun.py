"""Launch a module over N local processes with torchrun (``torch.distributed.run``).

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous for every process;
``--standalone`` runs the rendezvous on this host, on a free loopback port. A rank
that dies makes torchrun stop the others and exit non-zero; a rank that hangs is
ended by the collective's own timeout and, past that, by the caller's timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError


def check_nproc(nproc: int, device_type: str) -> None:
    """Bad input, before anything is launched: more processes than devices."""
    if device_type == "cuda":
        import torch

        have = torch.cuda.device_count()
        if nproc > have:
            raise UsageError(f"--nproc {nproc} needs {nproc} GPUs; this machine has {have}")
    else:
        have = os.cpu_count() or 1
        if nproc > have:
            raise UsageError(f"--nproc {nproc} exceeds the {have} CPU cores here; use --nproc {have} or fewer")


def run_torchrun(
    module: str,
    args: list[str],
    nproc: int,
    log: Path,
    timeout: float,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str = "",
) -> None:
    """Run ``python -m module args`` on ``nproc`` ranks per node; raise RuntimeError with the cause on failure.

    One node uses ``--standalone``; several nodes meet at ``rdzv_endpoint`` (host:port of
    the first node) with the c10d rendezvous, each started with its own ``node_rank``.
    """
    if nnodes > 1:
        where = [f"--nnodes={nnodes}", f"--node-rank={node_rank}", "--rdzv-backend=c10d"]
        where += [f"--rdzv-endpoint={rdzv_endpoint}", "--rdzv-id=accelbench"]
    else:
        where = ["--standalone", "--nnodes=1"]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *where,
        f"--nproc-per-node={nproc}",
        "--max-restarts=0",
        "-m",
        module,
        *args,
    ]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    with log.open("ab") as out:
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"torchrun did not finish within {timeout:g} s (see {log})") from None
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"torchrun exited with status {proc.returncode}: {tail[0][:300]} (see {log})")


def start_rank(device: str, threads: int | None, timeout_s: float) -> tuple[Any, int, int, int]:
    """Join the process group torchrun set up: (this rank's device, local rank, rank, world size).

    One GPU per local rank over NCCL; on CPUs gloo, with the cores split between the node's ranks
    unless ``threads`` says otherwise.
    """
    import datetime

    import torch
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    use_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    else:
        torch.set_num_threads(threads or max(1, (os.cpu_count() or 1) // int(os.environ["LOCAL_WORLD_SIZE"])))
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return dev, local_rank, dist.get_rank(), dist.get_world_size()


def finish_rank(rank: int, out: str, result: object) -> None:
    """End a rank's work: rank 0 writes ``result`` as JSON; everyone leaves the group together."""
    import json

    import torch.distributed as dist

    if rank == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


def exit_rank() -> None:
    """Leave without interpreter teardown: gloo's threads can abort a finished process in C++
    destructors at exit ("terminate called without an active exception"), turning a good run red."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
