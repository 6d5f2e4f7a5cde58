"""Does ``accelbench train DECODER --nproc N`` lose anything to the FSDP2 training loop a user would write?

In alternating rounds on the same host: ``accelbench train MODEL --nproc N`` (its own torchrun, as the suite
runs it) and a bare FSDP2 loop started by this script under torchrun: the same preset and scale, precision,
sequence length, micro-batch, AdamW and sharding (``fully_shard`` on each decoder layer and the root, built on
the meta device), timed over the same steps from a barrier before the first to a barrier after the last.
Prints each side's median tokens/s and the median of the per-round ratios (the goal, issue 30: >= 0.98).

    python bench/train_llm.py [--model llama3.1-8b] [--scale tiny] [--nproc 2] [--batch 8] [--seq-len 128]
        [--precision fp32|amp_bf16] [--steps 40] [--rounds 3] [--device cpu]

On a GPU host: ``--device cuda --scale full --layers 4 --seq-len 8192 --batch 1 --precision amp_bf16``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the environment variable a bare rank reads its options from
RANK_ARGS = "ACCELBENCH_BENCH_RANK_ARGS"


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama3.1-8b")
    p.add_argument("--scale", default="tiny")
    p.add_argument("--layers", type=int, default=0)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--precision", default="fp32", choices=("fp32", "amp_bf16"))
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--bare-rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default="", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def bare_rank(args: argparse.Namespace) -> None:
    """The loop a user writes with FSDP2 (one rank of it): meta build, fully_shard, AdamW, causal-LM loss."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import AutoModelForCausalLM

    from accelbench.workloads import workload_class
    from accelbench.workloads.decoder import config_of

    local = int(os.environ["LOCAL_RANK"])
    gpu = args.device != "cpu"
    device = torch.device(args.device, local) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // args.nproc))
    dist.init_process_group("nccl" if gpu else "gloo")
    preset = workload_class(args.model).preset
    config = config_of(preset, args.scale)
    if args.layers:
        config.num_hidden_layers = args.layers
    bf16 = args.precision == "amp_bf16"
    if args.nproc == 1:  # one device: the model built on it, trained as it is (what a user writes without FSDP)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, attn_implementation=preset.attention)
    else:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, attn_implementation=preset.attention)
        half = {"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32} if bf16 else {}
        mp = MixedPrecisionPolicy(**half)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        model.to_empty(device=device)
        model.init_weights()
    model.config.use_cache = False
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True if gpu else None)
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq_len), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    if gpu:
        torch.cuda.synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if gpu:
        torch.cuda.synchronize(device)
    dist.barrier()
    seconds = time.perf_counter() - start
    if dist.get_rank() == 0:
        rate = args.steps * args.batch * args.seq_len * dist.get_world_size() / seconds
        Path(args.out).write_text(json.dumps({"tokens_per_second": rate}))
    dist.destroy_process_group()


def bare_rate(args: argparse.Namespace, tmp: Path) -> float:
    out = tmp / "bare.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}", __file__]
    # the ranks' options travel in the environment: on Python 3.12 torchrun's parser reads options after the
    # script's path as its own ("--nproc could match --nproc-per-node")
    rank_args = [*sys.argv[1:], "--bare-rank", "--out", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1", **{RANK_ARGS: json.dumps(rank_args)})
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"the bare loop failed: {done.stderr.strip().splitlines()[-3:]}")
    return float(json.loads(out.read_text())["tokens_per_second"])


def accelbench_rate(args: argparse.Namespace, tmp: Path) -> float:
    cmd = [sys.executable, "-m", "accelbench", "train", args.model, "--scale", args.scale, "--nproc", str(args.nproc)]
    cmd += ["--batch-size", str(args.batch), "--seq-len", str(args.seq_len), "--precision", args.precision]
    cmd += ["--num-batches", str(args.steps), "--display-every", str(max(1, args.steps // 5))]
    cmd += ["--warmup", str(args.warmup), "--device", args.device, "--emulated"]
    cmd += ["--sharding", "fsdp"] if args.nproc > 1 else []  # one device: the plain loop, as the bare one
    cmd += ["--json", "--db", str(tmp / "b.db"), "--out", str(tmp / "r")]
    if args.layers:
        cmd += ["--layers", str(args.layers)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"accelbench failed: {done.stderr.strip().splitlines()[-3:]}")
    [r] = json.loads(done.stdout)["results"]
    if r["status"] != "ok":
        raise SystemExit(f"accelbench: {r['status']}: {r.get('error') or r.get('reason')}")
    return float(r["metrics"]["throughput"]["value"])


def main() -> None:
    args = options(json.loads(os.environ[RANK_ARGS]) if RANK_ARGS in os.environ else None)
    if args.bare_rank:
        bare_rank(args)
        return
    ratios, ours, bare = [], [], []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for i in range(args.rounds):
            b = bare_rate(args, tmp)
            a = accelbench_rate(args, tmp)
            ours.append(a)
            bare.append(b)
            ratios.append(a / b)
            print(f"round {i + 1}: accelbench {a:,.0f} tokens/s, bare FSDP2 loop {b:,.0f} tokens/s: {a / b:.3f}x")
    print(
        f"{args.model} {args.scale} x{args.nproc} ranks on {args.device}, {args.precision}, micro-batch {args.batch} "
        f"x {args.seq_len} tokens: accelbench {statistics.median(ours):,.0f} tokens/s, bare "
        f"{statistics.median(bare):,.0f} tokens/s; median ratio {statistics.median(ratios):.3f}x (goal >= 0.98)"
    )


if __name__ == "__main__":
    main()
