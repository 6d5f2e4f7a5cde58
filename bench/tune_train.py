"""Does ``accelbench tune MODEL --task train`` find the fastest training settings a bare loop reaches?

Runs the search (its own process, as a user would), then, on the same host straight after, a bare training
loop (SGD, momentum 0.9, one synthetic batch, timed from outside) over every setting the search screened
at the default batch: each precision this CPU or GPU runs natively x channels_last (x torch.compile with
--compile). Prints the bare loop's figure per setting, the search's confirmed winner, and the winner against
the fastest bare setting (the goal, issue 16: within 10%, i.e. >= 0.9).

    python bench/tune_train.py [--model resnet18] [--scale tiny] [--budget 5m] [--steps 20] [--compile]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from accelbench.workloads import workload_class

DTYPES = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16, "bf16": torch.bfloat16, "fp16": torch.float16}


def tune(args: argparse.Namespace, tmp: Path) -> dict:
    cmd = [sys.executable, "-m", "accelbench", "tune", args.model, "--task", "train", "--scale", args.scale]
    cmd += ["--budget", args.budget, "--json", "--db", str(tmp / "t.db"), "--out", str(tmp / "runs")]
    cmd += [] if args.compile else ["--no-compile"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"accelbench tune failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)["summary"]


def bare(args: argparse.Namespace, settings: dict, batch: int) -> float:
    """The loop a user writes for these settings: images/s over ``--steps`` steps after five of warm-up."""
    workload = workload_class(args.model)()
    model = workload.build(args.scale).train()
    precision = settings["precision"]
    data = workload.synthetic_batch(batch, torch.device("cpu"), args.scale)
    if precision in ("bf16", "fp16"):
        model = model.to(DTYPES[precision])
        data = tuple(t.to(DTYPES[precision]) if t.is_floating_point() else t for t in data)
    if settings.get("channels_last"):
        model = model.to(memory_format=torch.channels_last)
        data = tuple(t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t for t in data)
    run = torch.compile(model) if settings.get("compile") else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp = DTYPES.get(precision) if precision.startswith("amp_") else None

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=amp, enabled=amp is not None):
            loss = workload.loss(run, data)
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    return args.steps * batch / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--budget", default="5m")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--compile", action="store_true", help="search and time torch.compile too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        record = tune(args, Path(tmp))
    if record["status"] != "ok":
        raise SystemExit(f"the search found no winner: {record.get('error')}")
    d = record["details"]
    batch = workload_class(args.model).info.batch_for("cpu")
    screened = [r for r in d["ranking"] if r["settings"]["batch_size"] == "default"]
    print(f"{args.model} ({args.scale}), batch {batch}, {torch.get_num_threads()} threads, budget {args.budget}")
    best = 0.0
    for row in screened:
        rate = bare(args, row["settings"], batch)
        best = max(best, rate)
        print(f"  bare loop {row['label']:<40} {rate:>9.2f} images/s")
    winner = record["metrics"][record["primary_metric"]]["value"]
    top = next(r for r in d["ranking"] if r["status"] == "winner")
    label = top["label"]
    if top["settings"]["batch_size"] != "default":  # the winner's own batch, in the bare loop too
        rate = bare(args, top["settings"], int(top["settings"]["batch_size"]))
        best = max(best, rate)
        print(f"  bare loop {label:<40} {rate:>9.2f} images/s")
    print(f"tune winner {label:<40} {winner:>9.2f} images/s")
    print(f"winner / fastest bare setting: {winner / best:.2f} (goal >= 0.9); reproduce: {d['reproduce']}")


if __name__ == "__main__":
    main()
