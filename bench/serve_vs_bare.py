"""Does ``accelbench infer`` serve a language model as fast as transformers called bare, and build it as fast?

Measured side by side in one run, on one device (issue 44's performance goals):

1. Building: accelbench's ``build_model`` (random weights, seeded, created on the device in the served precision)
   against the bare build a user writes (``torch.set_default_dtype``; ``with torch.device(...)``;
   ``AutoModelForCausalLM.from_config``). Goal: <= 2x the bare time.
2. Serving, per engine: Offline output tokens/s of ``accelbench infer MODEL --scenario offline --engine E`` (its own
   process, LoadGen, the token SUT) against the same model called bare in this process with the same prompts'
   lengths, batch and new tokens: ``static``: ``generate`` with a static cache, batches of ``--batch``;
   ``static-compiled``: the same with ``--engine-compile``, the bare ``generate`` given the engine's own compile
   config (Inductor, mode "default": no CUDA graphs on either side; transformers' default, "reduce-overhead",
   would capture graphs on the bare side only); ``transformers``: ``generate_batch`` (continuous batching, the
   same cache plan; ``transformers-compiled``: both at compile level 1). Goal: >= 0.95x. The accelbench
   record's decode bandwidth utilization is printed beside it.

   Compiling is not measured: on each side it happens in a warm-up before the timed window (accelbench's probe,
   the bare side's first call), and its seconds are printed apart, so an 8B model's compile is said, not counted.

    python bench/serve_vs_bare.py [--device cuda] [--scale full] [--precision bf16] [--batch 64]
        [--input-tokens 512] [--output-tokens 128] [--engines static,static-compiled,transformers] [--duration S]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def options() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama3.1-8b")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--engines", default="static,transformers")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds each accelbench run may take")
    ap.add_argument("--duration", type=float, default=0.0, help="accelbench's minimum run seconds (0: its profile's)")
    return ap.parse_args()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_times(args: argparse.Namespace, device: torch.device) -> tuple[Any, float, float]:
    """accelbench's built model, its build time and the bare build's (each synchronized)."""
    from transformers import AutoModelForCausalLM

    from accelbench.devices.precision import torch_dtype
    from accelbench.serve.run import build_model
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads import workload_class
    from accelbench.workloads.decoder import config_of

    preset = workload_class(args.model).preset
    dtype = torch_dtype(args.precision)
    config = config_of(preset, args.scale)
    start = time.perf_counter()
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    with torch.device(device):
        bare = AutoModelForCausalLM.from_config(config, attn_implementation=preset.attention)
    torch.set_default_dtype(before)
    sync(device)
    bare_s = time.perf_counter() - start
    del bare
    if device.type == "cuda":
        torch.cuda.empty_cache()
    params = LLMServeParams(model=args.model, scale=args.scale, precision=args.precision, device=str(device))
    start = time.perf_counter()
    model, _ = build_model(params, device)
    sync(device)
    return model, time.perf_counter() - start, bare_s


def accelbench_run(args: argparse.Namespace, engine: str, tmp: Path) -> dict[str, Any]:
    name, compiled = engine.removesuffix("-compiled"), engine.endswith("-compiled")
    cmd = [sys.executable, "-m", "accelbench", "infer", args.model, "--scale", args.scale, "--scenario", "offline"]
    cmd += ["--engine", name, "--device", args.device, "--precision", args.precision, "--batch-size", str(args.batch)]
    cmd += ["--input-tokens", str(args.input_tokens), "--output-tokens", str(args.output_tokens), "--json"]
    cmd += ["--input-jitter", "1"] + (["--engine-compile"] if compiled else [])
    cmd += ["--duration", str(args.duration)] if args.duration else []
    out = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False, timeout=args.timeout)
    try:
        return json.loads(out.stdout)["results"][0]
    except (json.JSONDecodeError, KeyError, IndexError):
        sys.exit(f"accelbench failed: {out.stderr.strip().splitlines()[-3:]}")


def bare_generation(model: Any, new_tokens: int, compiled: bool) -> Any:
    """The bare side's ``GenerationConfig``: greedy, no end of sequence, a static cache, and, compiled, the engine's
    own compile config (the same Inductor mode, static shapes, every device), never transformers' default."""
    from transformers import GenerationConfig

    from accelbench.serve.engines.static import compile_config

    config = GenerationConfig(
        do_sample=False, pad_token_id=0, eos_token_id=model.config.vocab_size, cache_implementation="static",
        max_new_tokens=new_tokens, disable_compile=not compiled,
    )  # fmt: skip
    if compiled:
        config.compile_config = compile_config()
    return config


def bare_static(
    model: Any, args: argparse.Namespace, device: torch.device, requests: int, compiled: bool
) -> tuple[float, int, float, Any]:
    """``generate`` with a static cache over ``requests`` prompts in whole batches of ``--batch``: output tokens/s,
    the requests counted, and the first call's seconds (the compile, when compiled), timed apart, and the config."""
    config = bare_generation(model, args.output_tokens, compiled)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.input_tokens), device=device)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        start = time.perf_counter()
        model.generate(input_ids=ids, attention_mask=mask, generation_config=config)  # warm-up (and compile)
        sync(device)
        warm = time.perf_counter() - start
        batches = -(-requests // args.batch)
        start = time.perf_counter()
        for _ in range(batches):
            model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        sync(device)
    served = batches * args.batch
    return served * args.output_tokens / (time.perf_counter() - start), served, warm, config


def bare_continuous(
    model: Any, args: argparse.Namespace, device: torch.device, requests: int, compiled: bool
) -> tuple[float, int, float]:
    """``generate_batch`` (transformers' continuous batching) with accelbench's cache plan, its page size and its
    CUDA-graph and compile choices: output tokens/s, the requests counted and the warm-up's seconds."""
    from transformers import ContinuousBatchingConfig, GenerationConfig

    from accelbench.devices.kind import kind_of
    from accelbench.serve.engines.base import EngineSettings, PagedOptions
    from accelbench.serve.engines.continuous import cache_plan

    paged = PagedOptions()  # the engine's defaults: accelbench_run gives it no paged settings
    settings = EngineSettings(max_batch=args.batch, longest=args.input_tokens + args.output_tokens)
    blocks, tokens = cache_plan(settings, paged)
    generation = GenerationConfig(
        do_sample=False, pad_token_id=0, eos_token_id=model.config.vocab_size, max_new_tokens=args.output_tokens
    )
    cb = ContinuousBatchingConfig(
        page_size=paged.page_size, num_blocks=blocks, max_batch_tokens=tokens, max_requests_per_batch=args.batch,
        allow_block_sharing=False, use_cuda_graph=None if kind_of(device).accelerator else False,
        default_compile_level=1 if compiled else 0, seed=0,
    )  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, model.config.vocab_size, (requests, args.input_tokens), generator=gen).tolist()
    start = time.perf_counter()
    model.generate_batch(prompts[: args.batch], generation_config=generation, continuous_batching_config=cb)
    warm = time.perf_counter() - start
    start = time.perf_counter()
    out = model.generate_batch(prompts, generation_config=generation, continuous_batching_config=cb)
    seconds = time.perf_counter() - start
    return sum(len(o.generated_tokens) for o in out.values()) / seconds, len(out), warm


def main() -> None:
    args = options()
    device = torch.device(args.device)
    model, ours_s, bare_s = build_times(args, device)
    print(
        f"build {args.model} ({args.scale}) {args.precision} on {device}: accelbench {ours_s:.2f} s, bare "
        f"{bare_s:.2f} s: {ours_s / bare_s:.2f}x the bare time (goal <= 2x)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for engine in args.engines.split(","):
            r = accelbench_run(args, engine, Path(tmp))
            if r["status"] != "ok":
                print(f"{engine:>16}: accelbench {r['status']}: {r.get('error') or r.get('reason')}")
                continue
            ours = r["metrics"]["tokens_per_second"]["value"]
            requests = int(r["details"]["requests"])
            compiled = engine.endswith("-compiled")
            facts = r["details"].get("engine", {})
            threads = r["params"].get("threads") if device.type == "cpu" else None
            if threads:  # the bare side on the CPU threads accelbench's engine had (its other cores: LoadGen's)
                torch.set_num_threads(int(threads))
            if engine.startswith("static"):
                bare, counted, warm, config = bare_static(model, args, device, requests, compiled)
                mode = config.compile_config.mode if compiled else None
            else:
                bare, counted, warm = bare_continuous(model, args, device, requests, compiled)
                mode = "compile level 1" if compiled else None
            share = r["metrics"].get("decode_bandwidth_utilization", {}).get("value")
            limit = r["metrics"].get("decode_limit_tokens_per_second", {}).get("value")
            roof = f", decode {share:.3g}% of peak bandwidth (limit {limit:,.0f} tokens/s)" if share else ""
            print(
                f"{engine:>16}: accelbench {ours:,.0f} output tokens/s ({'VALID' if r.get('valid') else 'INVALID'}, "
                f"{requests} requests), bare {bare:,.0f} ({counted} requests): {ours / bare:.2f}x (goal >= 0.95){roof}"
            )
            first = r["details"].get("probe", {}).get("first_batch_seconds")
            print(
                f"{'':>16}  compile and warm-up apart from the timed window: accelbench "
                f"{first if first is not None else float('nan'):.2f} s (the probe's first batch), bare {warm:.2f} s "
                "(its first call)" + (f"; {threads} CPU thread(s) on each side" if threads else "")
            )
            if compiled:
                ours_mode = facts.get("compile_mode") or (
                    "compile level 1" if engine.startswith("transformers") else "?"
                )
                held = facts.get("compile_held")
                fallback = f" ({facts['compile_fallback']})" if facts.get("compile_fallback") else ""
                said = "" if held is None else f"; accelbench's compile held: {'yes' if held else 'no'}{fallback}"
                print(f"{'':>16}  compile mode: accelbench {ours_mode}, bare {mode}{said}")


if __name__ == "__main__":
    main()
