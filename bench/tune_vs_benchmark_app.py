"""Does ``accelbench tune`` find what this machine can do: what its own runtime and a few lines of PyTorch reach?

Side by side on this host, in the same minutes: OpenVINO's ``benchmark_app`` on the same ONNX export of the
same model (accelbench's served model, random weights seeded as ``accelbench infer`` seeds them) and the fastest
bare PyTorch loop (channels_last, in bf16 weights where the CPU computes bf16 natively, else fp32), before and
after ``accelbench tune MODEL --scenario S --budget B``. benchmark_app runs with its own defaults for the
hint (its precision is the plugin's default: bf16 on a CPU with native bf16, f32 on others), so the comparison
is with what an OpenVINO user gets without tuning. Prints, per scenario:

- offline: the tune winner's confirmed Offline samples/s against benchmark_app's throughput (batch --batch,
  throughput hint) and against the bare loop's (same batch); the goal (issue 33) is >= 0.9 for both, within
  the budget plus one trial;
- singlestream: the winner's p90 against benchmark_app's median latency (batch 1, latency hint); the goal is
  a p90 within 1.5x.

    python bench/tune_vs_benchmark_app.py [--model resnet50] [--scale full] [--batch 8] [--budget 10m]
        [--seconds 15] [--scenarios offline]

LoadGen's Offline figure counts every sample from the first query to the last answer; benchmark_app's counts
iterations over its measured window; the bare loop's, batches over its timed window: all are whole-system
throughputs of the same batch.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


def export_model(model: str, scale: str, path: Path) -> tuple[str, list[int]]:
    """The ONNX file accelbench's ONNX backends serve, and the input's per-sample shape."""
    from accelbench.infer.export import export
    from accelbench.infer.served import served

    spec = served(model, scale)
    torch.manual_seed(0)  # accelbench infer's random weights
    built = spec.build().eval()
    example = spec.collate([spec.synthetic(i, torch.device("cpu")) for i in range(2)])
    export(built, example, path)
    return "input_0", list(example[0].shape[1:])


def benchmark_app(onnx: Path, name: str, shape: list[int], batch: int, hint: str, seconds: int, out: Path) -> dict:
    """One benchmark_app run; its JSON report's execution results."""
    out.mkdir(parents=True, exist_ok=True)
    dims = ",".join(str(d) for d in [batch, *shape])
    cmd = ["benchmark_app", "-m", str(onnx), "-d", "CPU", "-shape", f"{name}[{dims}]", "-hint", hint]
    cmd += ["-t", str(seconds), "-report_type", "no_counters", "-report_folder", str(out), "-json_stats"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"benchmark_app failed: {done.stdout[-400:]}{done.stderr[-400:]}")
    return json.loads((out / "benchmark_report.json").read_text())["execution_results"]


def bare_torch(model: str, scale: str, batch: int, seconds: float) -> tuple[float, str]:
    """The fastest of a few lines of PyTorch: channels_last, bf16 weights where this CPU computes bf16 natively
    (fp32 otherwise, and also tried); samples/s over ``seconds`` after a warm-up, and what ran."""
    from accelbench.devices.host import cpu_flags, emulated_reason
    from accelbench.infer.served import served

    spec = served(model, scale)
    dtypes = [torch.float32] + ([torch.bfloat16] if emulated_reason("bf16", cpu_flags()) is None else [])
    best = (0.0, "")
    for dtype in dtypes:
        torch.manual_seed(0)
        net = spec.build().eval().to(dtype).to(memory_format=torch.channels_last)
        x = torch.cat([spec.synthetic(i, torch.device("cpu"))[0] for i in range(batch)]).to(dtype)
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            for _ in range(3):
                net(x)
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                net(x)
                n += 1
            rate = n * batch / (time.perf_counter() - start)
        what = f"{str(dtype).removeprefix('torch.')} weights, channels_last, batch {batch}"
        best = max(best, (rate, what))
    return best


def tune(args: argparse.Namespace, scenario: str, tmp: Path) -> dict:
    cmd = [sys.executable, "-m", "accelbench", "tune", args.model, "--scale", args.scale, "--scenario", scenario]
    cmd += ["--budget", args.budget, "--json", "--db", str(tmp / "t.db"), "--out", str(tmp / "runs")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"accelbench tune failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)["summary"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--scale", default="full", choices=("full", "tiny"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--budget", default="10m")
    ap.add_argument("--seconds", type=int, default=15, help="benchmark_app's time per run")
    ap.add_argument("--scenarios", default="offline")
    args = ap.parse_args()
    if shutil.which("benchmark_app") is None:
        raise SystemExit("benchmark_app not found: pip install 'accelbench[openvino]'")
    import openvino as ov

    default_precision = ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
    tmp = Path(tempfile.mkdtemp(prefix="accelbench-vs-bapp-"))
    onnx = tmp / "model.onnx"
    name, shape = export_model(args.model, args.scale, onnx)
    print(
        f"{args.model} ({args.scale}), {torch.get_num_threads()} threads; benchmark_app precision: "
        f"{default_precision.get_type_name()}"
    )
    for scenario in args.scenarios.split(","):
        batch, hint = (args.batch, "throughput") if scenario == "offline" else (1, "latency")
        key = "throughput" if scenario == "offline" else "latency (ms)"
        before = float(benchmark_app(onnx, name, shape, batch, hint, args.seconds, tmp / "b0")[key])
        bare_before = bare_torch(args.model, args.scale, args.batch, args.seconds) if scenario == "offline" else None
        record = tune(args, scenario, tmp)
        after = float(benchmark_app(onnx, name, shape, batch, hint, args.seconds, tmp / "b1")[key])
        bare_after = bare_torch(args.model, args.scale, args.batch, args.seconds) if scenario == "offline" else None
        app = statistics.mean([before, after])
        d = record.get("details", {})
        trials = [t["seconds"] for t in d.get("trials", [])]
        took = (
            f"tune took {d.get('elapsed_seconds', 0):.0f} s of a {d.get('budget_seconds', 0):.0f} s budget "
            f"(longest trial {max(trials, default=0):.0f} s); {d.get('accuracy') or ''}"
        )
        if record["status"] != "ok":
            print(f"{scenario}: benchmark_app {app:.2f}; no winner: {record.get('error') or record.get('reason')}")
            print(took)
            continue
        metric = record["metrics"][record["primary_metric"]]
        label = d.get("reproduce") or "; ".join(e["reproduce"] for e in d.get("equivalent", []))
        if scenario == "offline":
            assert bare_before is not None and bare_after is not None
            bare = statistics.mean([bare_before[0], bare_after[0]])
            print(f"offline, batch {args.batch}: accelbench tune's confirmed figure {metric['value']:.2f} samples/s")
            print(
                f"  vs OpenVINO benchmark_app {app:.2f} FPS ({before:.2f} before, {after:.2f} after): "
                f"{metric['value'] / app:.2f}x (goal >= 0.9)"
            )
            print(
                f"  vs bare PyTorch ({bare_before[1]}) {bare:.2f} samples/s ({bare_before[0]:.2f} before, "
                f"{bare_after[0]:.2f} after): {metric['value'] / bare:.2f}x (goal >= 0.9)"
            )
        else:
            ratio = metric["value"] * 1e3 / app
            print(
                f"singlestream: accelbench tune's p90 {metric['value'] * 1e3:.2f} ms vs benchmark_app's median "
                f"{app:.2f} ms ({before:.2f}, {after:.2f}): {ratio:.2f}x (goal <= 1.5)"
            )
        print(f"  winner: {label}")
        print(f"  {took}")


if __name__ == "__main__":
    main()
