"""MLCommons' system description, ``systems/<system>.json``, from the profile accelbench captured.

Every MLPerf submission (Inference and Training) describes each system it ran on in a flat JSON of string fields.
Much of it is what accelbench already recorded in every run folder's ``system.json`` (the CPU, memory, OS,
accelerators, the software stack), so that is filled from the profile; what no program can read (cooling, the
DIMM layout, the network, what a virtual disk is) comes from the user's TOML file, which also overrides any
captured value. What the checkers require of it, and the judgement, are :mod:`accelbench.submission.system_rules`.

Values are strings, as MLCommons' published system descriptions write them ("1", "24 GB", "N/A" for the
accelerator fields of a CPU-only system, "0" accelerators). Nothing that names the machine or its user (the
hostname, the Python executable's path) is ever copied from the profile.
"""

from __future__ import annotations

import platform
import re
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import accelbench
from accelbench.errors import UsageError
from accelbench.submission.system_rules import (
    REQUIRED,
    TRAINING_STATUSES,
    Benchmark,
    kind_of,
    required_fields,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: what a field of a system with no accelerator says (as MLCommons' published CPU-only systems write it)
_NA = "N/A"


# -- what the profile says ----------------------------------------------------------------------------------------


def _profile(system: Mapping[str, Any]) -> Mapping[str, Any]:
    """The profile itself, from a run folder's ``system.json`` or a record's ``system`` (``{"profile": ...}``)."""
    inner = system.get("profile")
    if "cpu" not in system and isinstance(inner, Mapping):
        return inner
    return system


def _same_machine(profile: Mapping[str, Any]) -> bool:
    """Whether ``profile`` was taken on this machine, so that a fact an older profile lacks may be read here."""
    from accelbench.devices import host

    cpu = profile.get("cpu") or {}
    return (
        bool(profile.get("hostname"))
        and profile.get("hostname") == platform.node()
        and (cpu.get("model") == host.cpu_model())
    )


def _binary_size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n / 2**10:g} KiB"


def _disk_size(n: int) -> str:
    """A disk's size as its vendor writes it: decimal, three figures ("275 GB", "3.84 TB")."""
    if n >= 10**12:
        return f"{n / 10**12:.3g} TB"
    return f"{n / 10**9:.3g} GB"


def _caches(caches: list[Mapping[str, Any]], cpu: Mapping[str, Any], sockets: int | None) -> str:
    """cpu0's caches in words: "L1d 32 KiB per core, L1i 32 KiB per core, L2 1 MiB per core, L3 32 MiB per socket"."""
    logical, physical = int(cpu.get("logical_cores") or 0), int(cpu.get("physical_cores") or 0)
    threads = logical // physical if logical and physical else 1
    parts = []
    for c in sorted(caches, key=lambda c: (int(c["level"]), str(c.get("type", "")))):
        suffix = {"Data": "d", "Instruction": "i"}.get(str(c.get("type")), "")
        shared = c.get("shared_cpus")
        if not shared:
            where = ""
        elif shared <= threads:
            where = " per core"
        elif sockets and logical and shared == logical // sockets:
            where = " per socket"
        else:
            where = f" per {shared} logical CPUs"
        parts.append(f"L{c['level']}{suffix} {_binary_size(int(c['size_bytes']))}{where}")
    return ", ".join(parts)


def _cudnn(version: Any) -> str:
    """torch's cuDNN number (90100, 8902) as a version: 9.x counts major x 10000, 8.x major x 1000."""
    if not isinstance(version, int):
        return str(version)
    if version >= 90000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def _grouped(values: list[str]) -> str:
    """One value, or each with its count ("8x NVIDIA H100 80GB HBM3" only where they differ)."""
    counts = Counter(values)
    if len(counts) == 1:
        return values[0]
    return " + ".join(f"{n}x {v}" for v, n in counts.items())


def _accelerator_fields(accelerators: list[Mapping[str, Any]]) -> dict[str, str]:
    """The accelerator fields: "N/A" for each on a host without one (as MLCommons' CPU-only systems write them);
    of a host with accelerators, what torch, NVML and the spec table say, and "" for what none of them does."""
    names = [f for f in REQUIRED if f.startswith("accelerator_")]
    if not accelerators:
        return {"accelerators_per_node": "0"} | dict.fromkeys(names, _NA)
    from accelbench.system.specs import find_spec

    out = dict.fromkeys(names, "")
    per_chip = int(accelerators[0].get("devices_per_chip") or 1)  # TPU v2/v3: a device is half a chip
    chips = len(accelerators) // per_chip if len(accelerators) % per_chip == 0 else len(accelerators)
    out["accelerators_per_node"] = str(chips)
    model_names = [str(a.get("name") or "") for a in accelerators]
    if all(model_names):
        out["accelerator_model_name"] = _grouped(model_names)
    memories = []
    for a, name in zip(accelerators, model_names, strict=True):
        spec = find_spec(name) if name else None
        if spec is not None and spec.mem_gb:  # the datasheet's figure: torch sees a little less than is fitted
            memories.append(f"{spec.mem_gb * per_chip:g} GB")
        elif a.get("memory_bytes"):
            memories.append(f"{round(int(a['memory_bytes']) * per_chip / 2**30)} GB")
    if memories and len(memories) == len(accelerators):
        out["accelerator_memory_capacity"] = _grouped(memories)
    hbm = {m.group(0) for n in model_names if (m := re.search(r"\bHBM\d?e?\b", n))}
    if len(hbm) == 1:
        out["accelerator_memory_configuration"] = hbm.pop()
    clocks = [a.get("max_sm_clock_mhz") for a in accelerators]
    if all(clocks):
        out["accelerator_frequency"] = _grouped([f"{c} MHz" for c in clocks])
    # NVML's PCIe link is the current one, which idles down to Gen1: the host interconnect is left to the user
    topology = str(accelerators[0].get("topology") or "")
    if len(accelerators) > 1 and re.search(r"\bNV\d+\b", topology):
        out["accelerator_interconnect"] = "NVLink"
    return out


def captured_fields(system: Mapping[str, Any], benchmark: str = "inference") -> dict[str, str]:
    """The fields the profile (a run folder's ``system.json``, or a record's ``system``) answers, as strings; a
    field it cannot answer is absent or "" (see :func:`describe`)."""
    kind = kind_of(benchmark)
    profile = _profile(system)
    cpu: Mapping[str, Any] = profile.get("cpu") or {}
    here = None if all(k in cpu for k in ("sockets", "caches")) and "storage" in profile else _same_machine(profile)
    out: dict[str, str] = {"number_of_nodes": "1"}  # a profile is one node's
    if cpu.get("model"):
        out["host_processor_model_name"] = str(cpu["model"])
    sockets = cpu.get("sockets")
    if sockets is None and "sockets" not in cpu and here:
        from accelbench.system.cpu import sockets as read_sockets

        sockets = read_sockets()
    physical = cpu.get("physical_cores")
    if sockets:
        out["host_processors_per_node"] = str(sockets)
        if physical and int(physical) % int(sockets) == 0:  # MLCommons counts the cores of one processor
            out["host_processor_core_count"] = str(int(physical) // int(sockets))
    if kind == "training" and cpu.get("logical_cores"):
        out["host_processor_vcpu_count"] = str(cpu["logical_cores"])
    if cpu.get("clock_ghz"):
        out["host_processor_frequency"] = f"{float(cpu['clock_ghz']):.2f} GHz"
    caches = cpu.get("caches")
    if caches is None and here:
        from accelbench.system.cpu import caches as read_caches

        caches = read_caches()
    if caches:
        out["host_processor_caches"] = _caches(caches, cpu, int(sockets) if sockets else None)
    total = (profile.get("memory") or {}).get("total_bytes")
    if total:  # the OS's total is a little under what is fitted; binary GB, as memory is sold and MLCommons writes
        out["host_memory_capacity"] = f"{round(int(total) / 2**30)} GB"
    out |= _storage_fields(profile, here)
    out |= _accelerator_fields(list(profile.get("accelerators") or []))
    out |= _software_fields(profile, kind)
    return out


def _storage_fields(profile: Mapping[str, Any], here: bool | None) -> dict[str, str]:
    disks = profile.get("storage")
    if disks is None and here:
        from accelbench.system.disks import disks as read_disks

        disks = read_disks()
    if not disks:
        return {}
    out = {"host_storage_capacity": _grouped_sizes([int(d["bytes"]) for d in disks])}
    kinds = [d.get("type") for d in disks]
    if all(kinds):  # a virtual disk's kind is unknown: the user says what backs it
        out["host_storage_type"] = " + ".join(dict.fromkeys(str(k) for k in kinds))
    return out


def _grouped_sizes(sizes: list[int]) -> str:
    counts = Counter(_disk_size(s) for s in sizes)
    if len(counts) == 1 and len(sizes) == 1:
        return next(iter(counts))
    return " + ".join(f"{n}x {size}" for size, n in counts.items())


def _software_fields(profile: Mapping[str, Any], kind: Benchmark) -> dict[str, str]:
    out: dict[str, str] = {}
    os_ = profile.get("os") or {}
    if os_.get("name"):
        out["operating_system"] = str(os_["name"]) + (f", kernel {os_['kernel']}" if os_.get("kernel") else "")
    torch = profile.get("torch") or {}
    version = str(torch.get("version") or "").split("+")[0]
    ours = profile.get("accelbench_version") or accelbench.__version__
    if version:  # the local tag (+cu130, +cpu) is the build; the CUDA it runs goes in other_software_stack
        out["framework"] = f"PyTorch {version}, accelbench {ours}"
    stack = []
    python = (profile.get("python") or {}).get("version")
    if python:
        stack.append(f"Python {python}")
    if torch.get("cuda"):
        stack.append(f"CUDA {torch['cuda']}")
        if torch.get("cudnn"):
            stack.append(f"cuDNN {_cudnn(torch['cudnn'])}")
        if torch.get("nccl") and kind == "training":
            stack.append(f"NCCL {torch['nccl']}")
    drivers = {str(a["driver"]) for a in profile.get("accelerators") or [] if a.get("driver")}
    if len(drivers) == 1:
        stack.append(f"driver {drivers.pop()}")
    if stack:
        out["other_software_stack"] = ", ".join(stack)
    return out


# -- the description ------------------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    """A TOML value as the JSON writes it: a string (true/false for a boolean, as MLCommons writes is_network)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def describe(
    system: Mapping[str, Any],
    *,
    submitter: str,
    division: str,
    system_name: str,
    status: str = "available",
    system_type: str = "datacenter",
    user: Mapping[str, Any] | None = None,
    benchmark: str = "inference",
    loadgen_version: str | None = None,
) -> dict[str, Any]:
    """``systems/<system>.json`` for one system: every key ``benchmark``'s checker requires, as strings.

    Three sources, each overriding the one before: what ``system`` (a run folder's ``system.json`` or a record's
    ``system``) captured (:func:`captured_fields`); then the arguments ``system_name``, ``status`` and
    ``system_type``; then ``user`` (the ``--system-toml`` file, :func:`load_user`), which may also add fields of its
    own (power, notes). ``submitter`` and ``division`` are the tree's folder names, which the checker compares the
    JSON with: the TOML may repeat them but not contradict them (a UsageError says so).

    A field nothing answers is "" so that :func:`problems` can name it. ``loadgen_version`` is the LoadGen the
    records ran (their ``details.loadgen_version``); it joins ``other_software_stack`` of an Inference system.
    The network division sets ``is_network`` "true" and its 12 fields; elsewhere ``is_network`` is left out, as
    the Inference checker requires the network fields whenever the key holds any non-empty string, "false" too.
    Training's ``status`` is written as its phrase ("available" -> "Available on-premise"; "cloud" -> "Available
    cloud"), and a value the user wrote outside those is kept for :func:`problems` to name.
    """
    kind = kind_of(benchmark)
    given = {str(k): _text(v) for k, v in (user or {}).items()}
    for key, value in (("submitter", submitter), ("division", division)):
        if key in given and given[key].lower() != value.lower():
            raise UsageError(
                f"the system TOML sets {key} = {given[key]!r} but the submission's {key} is {value!r} "
                f"(the checker compares them with the tree's folders): remove {key} from the TOML"
            )
    network = kind == "inference" and division.lower() == "network"
    fields = required_fields(kind, network=network)
    desc: dict[str, Any] = dict.fromkeys(fields, "")
    desc |= {k: v for k, v in captured_fields(system, kind).items() if k in fields}
    if loadgen_version and kind == "inference":
        stack = desc.get("other_software_stack") or ""
        desc["other_software_stack"] = ", ".join(s for s in (stack, f"MLPerf LoadGen {loadgen_version}") if s)
    desc |= {"submitter": submitter, "division": division, "system_name": system_name, "status": status}
    if kind == "inference":
        desc["system_type"] = system_type
    if network:
        desc["is_network"] = "true"
    desc |= given
    desc["submitter"], desc["division"] = submitter, division
    if not network and desc.get("is_network", "").lower() in ("", "false"):
        desc.pop("is_network", None)  # "false" would still make the checker require the 12 network fields
    if kind == "training":
        desc["status"] = TRAINING_STATUSES.get(str(desc["status"]).lower(), desc["status"])
    return desc


def load_user(path: Path) -> dict[str, Any]:
    """The user's ``--system-toml`` file: a flat table of ``field = value`` (strings, numbers, booleans)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file (the system TOML)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the system TOML ({exc})") from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML ({exc})") from None
    for key, value in data.items():
        if isinstance(value, dict):
            raise UsageError(f"{path}: [{key}] is a table; the system TOML is a flat list of field = value lines")
        if isinstance(value, list):
            raise UsageError(f"{path}: {key} is a list; give it one string, as the system JSON holds")
        if not isinstance(value, (str, int, float, bool)):
            raise UsageError(f"{path}: {key} is a {type(value).__name__}; give it a string")
    return data
