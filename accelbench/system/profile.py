"""Describe the machine a result came from, as the articles' configuration tables do.

The profile travels inside every result record, so that results imported from
another machine still say what they were measured on; the fingerprint groups
records of the same hardware and software stack.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from typing import Any

import psutil

from accelbench.devices import host
from accelbench.devices import kind as device_kind
from accelbench.system import cpu, disks, nvidia


def _os_name() -> str:
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return f"{platform.system()} {platform.version()}"


def _torch_section() -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    try:
        import torch
    except ImportError:
        return {"version": None, "cuda": None, "cudnn": None, "nccl": None}, [], []
    has_cuda = torch.cuda.is_available()
    section: dict[str, Any] = {
        "version": torch.__version__,
        "cuda": torch.version.cuda if has_cuda else None,
        "cuda_build": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if has_cuda else None,
        "nccl": None,
        "num_threads": torch.get_num_threads(),
    }
    if has_cuda:
        try:
            section["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # torch built without NCCL
            section["nccl"] = None
    kinds, accelerators = device_kinds()
    return section, accelerators, kinds


def device_kinds() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every device kind the seam knows (its vendor, its device count, or why it has none), and every
    accelerator device of the available kinds: its kind's facts of it, and its NVML facts where NVML reads it."""
    found = [kind.facts() for kind in device_kind.kinds()]
    devices: list[dict[str, Any]] = []
    monitored = False
    for kind, index, device in device_kind.accelerators():
        acc: dict[str, Any] = {"index": index, **kind.properties(device)}
        nvml_index = kind.monitored(device)
        if nvml_index is not None:
            acc.update(nvidia.device_facts(nvml_index))
            monitored = True
        devices.append(acc | {"kind": kind.name, "vendor": kind.vendor})
    topo = nvidia.topology() if monitored else None
    if topo and devices:
        devices[0]["topology"] = topo
    return found, devices


def fingerprint(profile: dict[str, Any]) -> str:
    """Stable hash of what determines performance: hardware and the software stack."""
    key = {
        "cpu": [profile["cpu"]["model"], profile["cpu"]["physical_cores"], profile["cpu"]["logical_cores"]],
        "memory_gib": round(profile["memory"]["total_bytes"] / 2**30),
        "accelerators": [[a.get("name"), a.get("memory_bytes"), a.get("driver")] for a in profile["accelerators"]],
        "os": profile["os"]["kernel"],
        "python": ".".join(profile["python"]["version"].split(".")[:2]),
        "torch": [profile["torch"]["version"], profile["torch"]["cuda"], profile["torch"]["cudnn"]],
    }
    blob = json.dumps(key, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def collect_profile() -> dict[str, Any]:
    """The machine's profile as a JSON-ready dict (imports torch)."""
    torch_section, accelerators, kinds = _torch_section()
    profile: dict[str, Any] = {
        "hostname": platform.node(),
        "cpu": {
            "model": host.cpu_model(),
            "physical_cores": cpu.physical_cores(),
            "logical_cores": psutil.cpu_count() or 1,
            "clock_ghz": cpu.cpu_clock_ghz(),
            "flags": host.cpu_flags(),
            "arch": platform.machine(),
            # for MLCommons' system description (accelbench.submission.systems); not in the fingerprint
            "sockets": cpu.sockets(),
            "caches": cpu.caches(),
        },
        "memory": {"total_bytes": psutil.virtual_memory().total},
        "os": {"name": _os_name(), "kernel": platform.release(), "system": platform.system()},
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "torch": torch_section,
        "accelerators": accelerators,
        "device_kinds": kinds,
        "storage": disks.disks(),
    }
    profile["fingerprint"] = fingerprint(profile)
    return profile
