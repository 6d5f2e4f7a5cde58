"""Commands that describe: ``system`` (this machine) and ``list`` (the benchmarks)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from accelbench.cli.render import console
from accelbench.devices.kind import by_name, kind_of
from accelbench.registry import BENCHMARKS
from accelbench.tta.recipes import RECIPES, recipe
from accelbench.workloads import MODELS, model_info


def register(sub: Any) -> None:
    system = sub.add_parser(
        "system",
        help="describe this machine: CPU, memory, OS, torch, accelerators, peak figures",
        description="Print the machine's profile, as recorded with every result (imports torch).",
    )
    system.add_argument("--json", action="store_true", help="print the profile as JSON")
    system.set_defaults(handler=cmd_system)

    ls = sub.add_parser("list", help="every benchmark with a one-line description", description="List the benchmarks.")
    ls.add_argument("--all", action="store_true", help="include the harness self-checks (selftest/*)")
    which = ls.add_mutually_exclusive_group()
    which.add_argument("--models", action="store_true", help="list the models 'accelbench train' can train")
    which.add_argument(
        "--tta", action="store_true", help="list the workloads 'accelbench tta' trains: data format, metric, target"
    )
    ls.set_defaults(handler=cmd_list)


def cmd_list(ns: argparse.Namespace) -> int:
    from rich.table import Table

    if ns.models:
        return _list_models()
    if ns.tta:
        return _list_tta()

    table = Table()
    table.add_column("benchmark")
    table.add_column("description")
    for info in BENCHMARKS.values():
        if info.hidden and not ns.all:
            continue
        table.add_row(info.name, info.description)
    console.print(table)
    if not ns.all:
        console.print("[dim]harness self-checks (selftest/ok, raise, crash, hang): accelbench list --all[/]")
    return 0


def _list_tta() -> int:
    """Every time-to-quality workload: the data it reads, its metric and default target, and where they come from."""
    from rich.table import Table

    table = Table(
        caption="accelbench tta NAME --data-dir DIR [--target T] [--second-target T2 (the second metric, where two)]; "
        "--scale tiny trains a small model"
    )
    for column in ("workload", "data (--data-dir)", "metric", "target", "MLPerf", "model and source"):
        table.add_column(column, no_wrap=column in ("workload", "metric"))
    for name in RECIPES:
        r = recipe(name)
        sign = "<=" if r.lower_is_better else ">="
        goals = r.targets()
        target = ", ".join(f"{sign} {t:g}" for t in goals.values())
        data = r.data_hint if r.needs_data_dir else "none (ships with scikit-learn)"
        table.add_row(name, data, " and ".join(goals), target, r.mlperf_benchmark, r.source)
    console.print(table)
    return 0


def _list_models() -> int:
    from rich.table import Table

    table = Table(caption="default batch sizes are per device", caption_justify="left")
    table.add_column("model", no_wrap=True)
    table.add_column("domain")
    table.add_column("samples")
    table.add_column("input")
    table.add_column("batch GPU", justify="right")
    table.add_column("batch CPU", justify="right")
    for name in MODELS:
        info = model_info(name)
        if info.serving == "tokens":
            continue  # the language models' own table below
        table.add_row(
            name,
            info.domain,
            info.sample_unit,
            info.input_shape,
            str(info.batch_for("gpu")),
            str(info.batch_for("cpu")),
        )
    console.print(table)
    console.print(_decoder_table())
    return 0


def _decoder_table() -> Any:
    """The language-model presets with what a token costs, counted on the model transformers builds."""
    from rich.table import Table

    from accelbench.serve.limits import MLPERF_LIMITS
    from accelbench.workloads.decoder import PRESETS, config_of, figures

    table = Table(
        title="language models: accelbench infer NAME [--scale tiny] (served token by token)",
        caption="parameters counted on the model transformers builds from the published config.json (meta "
        "device); KV cache at bf16, full-attention layers; FLOPs forward, 2 x active non-embedding parameters; "
        "limits p99 TTFT/TPOT ms from mlperf.conf (* borrowed from a model of its class)",
        caption_justify="left",
    )
    for column in ("model", "architecture", "params", "active", "KV/token", "GFLOP/token", "server", "interactive"):
        table.add_column(column, justify="left" if column in ("model", "architecture") else "right")
    for name, preset in PRESETS.items():
        f = figures(config_of(preset, "full"))
        mark = "" if preset.mlperf_own else "*"
        limits = MLPERF_LIMITS.get(preset.mlperf, {})
        cell = {sc: f"{v[0]:g}/{v[1]:g}{mark}" if (v := limits.get(sc)) else "-" for sc in ("server", "interactive")}
        table.add_row(
            name,
            ("MoE " if preset.moe else "") + preset.model_type,
            f"{f.params / 1e9:.1f}B",
            f"{f.active_params / 1e9:.1f}B",
            f"{f.kv_bytes_per_token / 1024:.0f} KiB",
            f"{f.flops_per_token / 1e9:.1f}",
            cell["server"],
            cell["interactive"],
        )
    return table


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def cmd_system(ns: argparse.Namespace) -> int:
    from accelbench.measure.energy import readable
    from accelbench.system.profile import collect_profile

    profile = collect_profile()
    energy = readable(gpus=_monitored(profile))
    if ns.json:
        sys.stdout.write(json.dumps(profile | {"energy_domains": energy}, indent=2, sort_keys=True) + "\n")
        return 0
    from rich.table import Table

    cpu, t = profile["cpu"], profile["torch"]
    table = Table(title=f"system {profile['fingerprint']}", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    clock = f" @ {cpu['clock_ghz']:.2f} GHz" if cpu.get("clock_ghz") else ""
    table.add_row("CPU", f"{cpu['model']}{clock}")
    table.add_row("cores", f"{cpu['physical_cores']} physical, {cpu['logical_cores']} logical ({cpu['arch']})")
    table.add_row("ISA", " ".join(cpu["flags"]) or "-")
    table.add_row("memory", _gib(profile["memory"]["total_bytes"]))
    table.add_row("OS", f"{profile['os']['name']} (kernel {profile['os']['kernel']})")
    table.add_row("Python", profile["python"]["version"])
    table.add_row("PyTorch", f"{t['version']}, {t['num_threads']} threads by default")
    table.add_row(
        "CUDA / cuDNN / NCCL", " / ".join(str(t[k]) if t[k] is not None else "-" for k in ("cuda", "cudnn", "nccl"))
    )
    for found in profile["device_kinds"]:  # every kind the device seam knows, and why one has no device here
        vendor = f" ({found['vendor']})" if found["vendor"] else ""
        state = f"unavailable: {found['unavailable']}" if found["unavailable"] else f"{found['devices']} device(s)"
        table.add_row(f"kind {found['kind']}{vendor}", state)
    for acc in profile["accelerators"]:
        table.add_row(f"{acc['kind']}:{acc['index']}", _accelerator_facts(acc))
    if not profile["accelerators"]:
        table.add_row("accelerators", "none found by any device kind")
    for domain, state in energy.items():
        table.add_row(f"energy: {domain}", state)
    console.print(table)
    console.print(_peaks_table(profile))
    topo = next((acc.get("topology") for acc in profile["accelerators"] if acc.get("topology")), None)
    if topo:
        console.print("GPU interconnect (nvidia-smi topo -m):")
        console.print(topo, markup=False)
    return 0


def _accelerator_facts(acc: dict[str, Any]) -> str:
    """'NVIDIA H100 80GB HBM3: 79.1 GiB, 132 SMs, cc 9.0, driver 550.54': what the profile holds of one device."""
    facts = [_gib(acc["memory_bytes"])] if acc.get("memory_bytes") else []
    if acc.get("multiprocessors"):
        facts.append(f"{acc['multiprocessors']} SMs")
    if acc.get("compute_capability"):
        facts.append(f"cc {acc['compute_capability']}")
    if acc.get("arch"):
        facts.append(acc["arch"])
    if acc.get("driver"):
        facts.append(f"driver {acc['driver']}")
    if acc.get("max_sm_clock_mhz"):
        facts.append(f"{acc['max_sm_clock_mhz']} MHz max")
    if acc.get("power_limit_w"):
        facts.append(f"{acc['power_limit_w']:.0f} W limit")
    return f"{acc['name']}: " + ", ".join(facts) if facts else str(acc["name"])


def _devices(profile: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(kind, torch.device) of each accelerator the profile lists, as its kind resolves it."""
    found = [(by_name(acc["kind"]), acc["index"]) for acc in profile["accelerators"]]
    return [(kind, kind.resolve(index)) for kind, index in found if kind is not None]


def _monitored(profile: dict[str, Any]) -> list[int]:
    """The indices NVML knows the profile's accelerators by (those its energy reader can read)."""
    found = (kind.monitored(device) for kind, device in _devices(profile))
    return [i for i in found if i is not None]


def _peaks_table(profile: dict[str, Any]) -> Any:
    import torch
    from rich.table import Table

    from accelbench.system.specs import peak_for

    table = Table(title="peak TFLOPS used for % of peak", title_justify="left")
    table.add_column("device")
    for p in ("fp32", "tf32", "fp16", "bf16"):
        table.add_column(p, justify="right")
    table.add_column("source")
    devices = [torch.device("cpu")] + [device for _, device in _devices(profile)]
    for dev in devices:
        peaks = [peak_for(dev, p) for p in ("fp32", "tf32", "fp16", "bf16")]
        source = next((pk.source for pk in peaks if pk), "not in the spec table")
        table.add_row(kind_of(dev).record_name(dev), *[f"{pk.tflops:.3g}" if pk else "-" for pk in peaks], source)
    return table
