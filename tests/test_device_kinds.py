"""The device seam: a kind of one's own runs every family end to end from its own module, and the AMD and Intel
kinds answer through fakes of their documented APIs (torch's HIP build, ``torch.xpu``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import run_cli

from accelbench.devices import resolve_device
from accelbench.devices.kind import kind_of
from accelbench.errors import UsageError

TESTS = Path(__file__).parent


def test_a_kind_of_ones_own_runs_a_gemm_a_training_step_and_loadgen(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """``tests/fake_kind.py`` is the only code of the fakeaccel kind: no edit anywhere else runs it."""
    log = tmp_path / "fake.log"
    env = cli_env | {
        "ACCELBENCH_DEVICE_KINDS": "fake_kind",
        "FAKE_KIND_LOG": str(log),
        "PYTHONPATH": os.pathsep.join([str(TESTS), cli_env.get("PYTHONPATH", "")]),
    }
    # one command line for the three (one interpreter and one worker server, not three): each still runs in its
    # own worker process, which inherits the kind from the environment as any process accelbench starts does
    runs = {
        "gemm": ("kernels/gemm", "m = 64, n = 64, k = 64, min_time = 0.05, max_time = 0.3"),
        "train": (
            "train/throughput",
            'model = "resnet18", scale = "tiny", batch_size = "4", warmup = 1, num_batches = 4',
        ),
        "infer": ("infer/loadgen", 'model = "resnet18", scale = "tiny", batch_size = 4, duration = 0.5'),
    }
    suite = tmp_path / "fake.toml"
    suite.write_text("".join(f'[[benchmark]]\nname = "{b}"\nparams = {{ {p} }}\n' for b, p in runs.values()))
    out = run_cli(["run", str(suite), "--device", "fakeaccel", "--threads", "1", "--json"], env, tmp_path, process=True)
    assert out.returncode == 0, out.stderr[-2000:]
    found = {r["benchmark"]: r for r in json.loads(out.stdout)["results"]}
    assert len(found) == len(runs), list(found)
    records = {name: found[benchmark] for name, (benchmark, _) in runs.items()}
    for name, r in records.items():
        assert r["status"] == "ok", (name, r.get("error"), r.get("reason"))
        assert r["params"]["device"] == "fakeaccel", name
    assert records["gemm"]["details"]["clock"] == "perf_counter_ns+fakeaccel_synchronize"
    assert records["train"]["details"]["peak_memory_method"] == "fake counter"
    asked = log.read_text().split()
    assert asked.count("synchronize") > 10 and "reset_peak_memory" in asked


def test_an_amd_gpu_is_the_rocm_kind_on_a_hip_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """A HIP build of torch answers torch.cuda for AMD GPUs and says so in torch.version.hip."""
    arch = {"name": "gfx942:sramecc+:xnack-"}
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "AMD Instinct MI300X")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(gcnArchName=arch["name"]))
    gpu = torch.device("cuda", 1)
    kind = kind_of(gpu)
    assert kind.name == "rocm" and kind.vendor == "AMD" and kind.dist_backend == "nccl"  # RCCL answers as nccl
    assert kind.record_name(gpu) == "rocm:1" and kind.label(gpu) == "AMD Instinct MI300X"
    assert resolve_device("rocm:1") == gpu and kind_of(resolve_device("cuda")).name == "rocm"
    assert "NVIDIA Tensor Core mode" in kind.unsupported(gpu, "tf32")
    assert kind.unsupported(gpu, "fp8") is None and kind.unsupported(gpu, "bf16") is None
    arch["name"] = "gfx90a:sramecc+:xnack-"  # MI250X: bf16, no fp8
    assert kind.unsupported(gpu, "bf16") is None and "CDNA 3" in kind.unsupported(gpu, "fp8")
    with pytest.raises(UsageError, match="has 2 rocm device"):
        resolve_device("rocm:2")


class FakeXpu:
    """``torch.xpu``'s documented surface, as far as accelbench asks it."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.peak = 0

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def set_device(self, device: object) -> None:
        self.calls.append("set_device")

    def get_device_name(self, device: object = None) -> str:
        return "Intel(R) Data Center GPU Max 1550"

    def synchronize(self, device: object = None) -> None:
        self.calls.append("synchronize")

    def reset_peak_memory_stats(self, device: object = None) -> None:
        self.peak = 100

    def memory_allocated(self, device: object = None) -> int:
        return 100

    def max_memory_allocated(self, device: object = None) -> int:
        return self.peak + 4096

    def empty_cache(self) -> None:
        self.calls.append("empty_cache")


def test_an_intel_gpu_answers_through_torch_xpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.measure.timer import Timer, TimerConfig
    from accelbench.train.loop import PeakMemory

    fake = FakeXpu()
    monkeypatch.setattr(torch, "xpu", fake, raising=False)
    device = resolve_device("xpu")
    kind = kind_of(device)
    assert device == torch.device("xpu", 0) and kind.name == "xpu" and kind.dist_backend == "xccl"
    assert kind.label(device) == "Intel(R) Data Center GPU Max 1550" and kind.record_name(device) == "xpu:0"
    kind.make_current(device)
    m = Timer(lambda: None, device, TimerConfig(warmup_seconds=0, min_reps=3, min_time=0, max_time=0.05)).measure()
    assert m.clock == "perf_counter_ns+xpu_synchronize" and fake.calls.count("synchronize") >= 3
    with PeakMemory(device) as mem:
        pass
    assert mem.method == "torch.xpu.max_memory_allocated" and mem.growth == 4096
    assert "set_device" in fake.calls


VENDORS = {"cuda", "rocm", "hip", "xpu", "mps"}


def _strings(node: object) -> list[str]:
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def vendor_branches(root: Path) -> list[str]:
    """Comparisons (``==``, ``in``, ``startswith``) with a device kind's name, outside ``devices/``."""
    import ast

    hits = []
    for py in sorted(root.rglob("*.py")):
        if "devices" in py.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.Compare):
                values = [s for o in (node.left, *node.comparators) for s in _strings(o)]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("startswith", "endswith"):
                values = [s for a in node.args for s in _strings(a)]
            else:
                continue
            if any(v.split(":")[0] in VENDORS for v in values):
                hits.append(f"{py.relative_to(root.parent)}:{node.lineno}")
    return hits


def test_no_vendor_branch_outside_the_device_seam() -> None:
    """Families, kit, measure and serving ask the device's kind; only ``devices/`` knows a vendor's name."""
    assert vendor_branches(Path(__file__).parent.parent / "accelbench") == []


def test_a_tpu_asked_by_its_name_is_pointed_to_the_xla_kind():
    from accelbench.devices import resolve_device
    from accelbench.errors import UsageError

    with pytest.raises(UsageError, match="unknown device 'tpu'; a TPU is --device xla"):
        resolve_device("tpu")
