"""Does ``accelbench tune`` find what the runtime an Intel-CPU user would pick reaches on its own?

Side by side on this host, in the same minutes: OpenVINO's ``benchmark_app`` on the same ONNX export of the
same model (accelbench's served model, random weights seeded as ``accelbench infer`` seeds them), before and
after ``accelbench tune MODEL --scenario S --budget B``. benchmark_app runs with its own defaults for the
hint (its precision is the plugin's default: bf16 on an AMX CPU, f32 on others), so the comparison is with
what an OpenVINO user gets without tuning. Prints, per scenario:

- offline: benchmark_app's throughput (batch --batch, throughput hint) against the tune winner's confirmed
  Offline samples/s; the goal (issue 16) is a ratio >= 0.8;
- singlestream: benchmark_app's median latency (batch 1, latency hint) against the winner's p90; the goal is
  a p90 within 1.5x.

    python bench/tune_vs_benchmark_app.py [--model resnet50] [--scale full] [--batch 8] [--budget 10m]
        [--seconds 15] [--scenarios offline,singlestream]

LoadGen's Offline figure counts every sample from the first query to the last answer; benchmark_app's counts
iterations over its measured window: both are whole-system throughputs of the same batch.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
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
    ap.add_argument("--scenarios", default="offline,singlestream")
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
    rows = []
    for scenario in args.scenarios.split(","):
        batch, hint = (args.batch, "throughput") if scenario == "offline" else (1, "latency")
        key = "throughput" if scenario == "offline" else "latency (ms)"
        before = float(benchmark_app(onnx, name, shape, batch, hint, args.seconds, tmp / "b0")[key])
        record = tune(args, scenario, tmp)
        after = float(benchmark_app(onnx, name, shape, batch, hint, args.seconds, tmp / "b1")[key])
        app = statistics.mean([before, after])
        if record["status"] != "ok":
            rows.append((scenario, f"{app:.2f}", "no winner", record.get("error", ""), "-"))
            continue
        metric = record["metrics"][record["primary_metric"]]
        label = record["details"]["reproduce"]
        if scenario == "offline":
            ratio, goal = metric["value"] / app, ">= 0.8"
            ours = f"{metric['value']:.2f} samples/s"
            theirs = f"{app:.2f} FPS ({before:.2f}, {after:.2f})"
        else:
            ratio, goal = metric["value"] * 1e3 / app, "<= 1.5"
            ours = f"p90 {metric['value'] * 1e3:.2f} ms"
            theirs = f"median {app:.2f} ms ({before:.2f}, {after:.2f})"
        rows.append((scenario, theirs, ours, f"{ratio:.2f} (goal {goal})", label))
    width = max(len(r[1]) for r in rows)
    print(f"{'scenario':<13} {'benchmark_app':<{width}}  {'accelbench tune':<22} {'ratio':<20} winner")
    for scenario, theirs, ours, ratio, label in rows:
        print(f"{scenario:<13} {theirs:<{width}}  {ours:<22} {ratio:<20} {label}")


if __name__ == "__main__":
    main()
