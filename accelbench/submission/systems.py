"""MLCommons' system description, ``systems/<system>.json``, from the profile accelbench captured.

Every MLPerf submission (Inference and Training) describes each system it ran on in a flat JSON of string fields.
Much of it is what accelbench already recorded in every run folder's ``system.json`` (the CPU, memory, OS,
accelerators, the software stack), so that is filled from the profile; what no program can read (cooling, the
DIMM layout, the network, what a virtual disk is) comes from the user's TOML file, which also overrides any
captured value. :func:`problems` names what is still missing or invalid before MLCommons' checker would.

The rules are those of MLCommons' checkers, read as a spec (docs/mlperf-rules.md §5):

* Inference: ``tools/submission/submission_checker/checks/system_check.py`` and the ``SYSTEM_DESC_*`` lists in
  ``constants.py`` of mlcommons/inference: 35 required keys, 26 of them non-empty; ``status`` in
  available/preview/rdi (lower-cased), ``system_type`` in datacenter/edge/"datacenter,edge"/"edge,datacenter",
  ``division`` and ``submitter`` equal to the tree's folders, and ``number_of_nodes``/``accelerators_per_node``
  ``int()``-able (``results.py`` multiplies them). The network division adds ``is_network`` and 12 network fields.
* Training: ``mlperf_logging/system_desc_checker/system_desc_checker.py`` (PyPI ``mlperf-logging`` 4.1.68):
  33 required keys. Beyond Inference's it needs ``host_processor_vcpu_count``; it does not ask for
  ``system_type``, ``system_type_detail`` nor ``host_network_card_count``. Its ``status`` is one of four phrases
  ("Available on-premise", "Available cloud", "Preview", "Research, Development, or Internal (RDI)"), and its
  result summarizer ``int()``s ``host_processors_per_node`` as well as the node and accelerator counts.

Values are strings, as MLCommons' published system descriptions write them ("1", "24 GB", "N/A" for the
accelerator fields of a CPU-only system, "0" accelerators). Nothing that names the machine or its user (the
hostname, the Python executable's path) is ever copied from the profile.
"""

from __future__ import annotations

import difflib
import platform
import re
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import accelbench
from accelbench.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Benchmark = Literal["inference", "training"]

#: the Inference checker's ``SYSTEM_DESC_REQUIRED_FIELDS`` (constants.py), in its order
REQUIRED: tuple[str, ...] = (
    "division",
    "submitter",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processor_model_name",
    "host_processors_per_node",
    "host_processor_core_count",
    "host_memory_capacity",
    "host_storage_capacity",
    "host_storage_type",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_memory_capacity",
    "framework",
    "operating_system",
    "system_type",
    "other_software_stack",
    "host_processor_frequency",
    "host_processor_caches",
    "host_memory_configuration",
    "host_processor_interconnect",
    "host_networking",
    "host_networking_topology",
    "accelerator_frequency",
    "accelerator_host_interconnect",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "accelerator_memory_configuration",
    "accelerator_on-chip_memories",
    "cooling",
    "hw_notes",
    "sw_notes",
    "host_network_card_count",
    "system_type_detail",
)

#: the Inference checker's ``SYSTEM_DESC_MEANINGFUL_RESPONSE_REQUIRED_FIELDS``: present and non-empty
MEANINGFUL: frozenset[str] = frozenset(
    {
        "division",
        "submitter",
        "system_type",
        "status",
        "system_name",
        "number_of_nodes",
        "host_processor_model_name",
        "host_processors_per_node",
        "host_processor_core_count",
        "host_memory_capacity",
        "host_memory_configuration",
        "host_storage_capacity",
        "host_storage_type",
        "host_networking",
        "host_network_card_count",
        "host_networking_topology",
        "accelerators_per_node",
        "accelerator_model_name",
        "accelerator_memory_capacity",
        "accelerator_host_interconnect",
        "accelerator_memory_configuration",
        "accelerator_interconnect",
        "cooling",
        "framework",
        "operating_system",
        "other_software_stack",
    }
)

#: mlperf-logging's system_desc_checker ``required_fields``: Inference's minus system_type, system_type_detail and
#: host_network_card_count, plus host_processor_vcpu_count (the one field Training needs beyond Inference's)
TRAINING_REQUIRED: tuple[str, ...] = (
    "submitter",
    "division",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processors_per_node",
    "host_processor_model_name",
    "host_processor_core_count",
    "host_processor_vcpu_count",
    "host_processor_frequency",
    "host_processor_caches",
    "host_processor_interconnect",
    "host_memory_capacity",
    "host_storage_type",
    "host_storage_capacity",
    "host_networking",
    "host_networking_topology",
    "host_memory_configuration",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_host_interconnect",
    "accelerator_frequency",
    "accelerator_on-chip_memories",
    "accelerator_memory_configuration",
    "accelerator_memory_capacity",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "cooling",
    "hw_notes",
    "framework",
    "other_software_stack",
    "operating_system",
    "sw_notes",
)

#: the Inference checker's ``SYSTEM_DESC_REQUIRED_FIELDS_NETWORK_MODE``, required when ``is_network`` is set
NETWORK_FIELDS: tuple[str, ...] = (
    "is_network",
    "network_type",
    "network_media",
    "network_rate",
    "nic_loadgen",
    "number_nic_loadgen",
    "net_software_stack_loadgen",
    "network_protocol",
    "number_connections",
    "nic_sut",
    "number_nic_sut",
    "net_software_stack_sut",
    "network_topology",
)

#: fields MLCommons knows but does not require (power: listed, not enforced): not typos in a user's TOML
OPTIONAL_FIELDS: tuple[str, ...] = (
    "system_power_capacity",
    "power_management",
    "filesystem",
    "boot_firmware_version",
    "management_firmware_version",
    "other_hardware",
    "number_of_type_nics_installed",
    "nics_enabled_firmware",
    "nics_enabled_os",
    "nics_enabled_connected",
    "network_speed_mbit",
    "power_supply_quantity_and_rating_watts",
    "power_supply_details",
    "disk_drives",
    "disk_controllers",
    "system_power_only",
)

DIVISIONS: dict[str, tuple[str, ...]] = {"inference": ("closed", "open", "network"), "training": ("closed", "open")}
STATUSES: tuple[str, ...] = ("available", "preview", "rdi")
#: Training's status phrases, and the short names :func:`describe` accepts for them ("cloud": Training only)
TRAINING_STATUSES: dict[str, str] = {
    "available": "Available on-premise",
    "cloud": "Available cloud",
    "preview": "Preview",
    "rdi": "Research, Development, or Internal (RDI)",
}
SYSTEM_TYPES: tuple[str, ...] = ("datacenter", "edge", "datacenter,edge", "edge,datacenter")
#: the fields a checker or its summarizer turns into numbers with ``int()``
NUMERIC: dict[str, tuple[str, ...]] = {
    "inference": ("number_of_nodes", "accelerators_per_node"),
    "training": ("number_of_nodes", "accelerators_per_node", "host_processors_per_node"),
}

#: what to write for a field no program can read, for the messages that ask for it
HINTS: dict[str, str] = {
    "submitter": "the organisation, as the tree's folder names it",
    "system_name": 'e.g. "2x Xeon 8480+ (1x H100 SXM)"',
    "host_memory_configuration": 'e.g. "16x 64GB DDR5-4800"',
    "host_storage_type": 'e.g. "NVMe SSD"',
    "host_storage_capacity": 'e.g. "2x 3.84 TB"',
    "host_networking": 'e.g. "2x 100 GbE", or "N/A" for a single node without one',
    "host_network_card_count": 'e.g. "2"',
    "host_networking_topology": 'e.g. "N/A" for a single node, else the fabric ("Ethernet, fat tree")',
    "accelerator_host_interconnect": 'e.g. "PCIe Gen5 x16"',
    "accelerator_memory_configuration": 'e.g. "HBM3"',
    "accelerator_interconnect": 'e.g. "NVLink 4.0 900 GB/s", or "N/A" for none',
    "cooling": 'e.g. "air" or "liquid"',
    "host_processors_per_node": "the CPU sockets",
    "host_processor_core_count": "cores per processor",
    "host_processor_vcpu_count": "logical CPUs per node",
    "framework": 'e.g. "PyTorch 2.5.1"',
}

_ALL_KNOWN = frozenset(REQUIRED) | frozenset(TRAINING_REQUIRED) | frozenset(NETWORK_FIELDS) | frozenset(OPTIONAL_FIELDS)
_NA = "N/A"


def _kind(benchmark: str) -> Benchmark:
    if benchmark == "inference":
        return "inference"
    if benchmark == "training":
        return "training"
    raise UsageError(f"no MLCommons system description for {benchmark!r}: inference or training")


def required_fields(benchmark: str = "inference", *, network: bool = False) -> tuple[str, ...]:
    """The keys a system description must hold for ``benchmark`` (and the network division's, for Inference)."""
    kind = _kind(benchmark)
    fields = REQUIRED if kind == "inference" else TRAINING_REQUIRED
    return fields + NETWORK_FIELDS if network and kind == "inference" else fields


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
    kind = _kind(benchmark)
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
    kind = _kind(benchmark)
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


# -- what is wrong with it ------------------------------------------------------------------------------------------


def _issues(desc: Mapping[str, Any], benchmark: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(the fields missing or empty, (field, what is wrong with its value) for each invalid one)."""
    kind = _kind(benchmark)
    is_network = str(desc.get("is_network") or "").strip()
    division = str(desc.get("division") or "").strip().lower()
    # the checker requires the network fields whenever is_network holds anything; stricter than it, accelbench
    # wants them non-empty too, as describe() fills them with "" placeholders
    fields = required_fields(kind, network=kind == "inference" and (bool(is_network) or division == "network"))
    network = set(NETWORK_FIELDS) if len(fields) > len(REQUIRED) else set()
    missing = [f for f in fields if f not in desc or ((f in MEANINGFUL or f in network) and not str(desc[f]).strip())]
    invalid: list[tuple[str, str]] = []

    def bad(field: str, why: str) -> None:
        if field in desc and str(desc[field]).strip() and field not in missing:
            invalid.append((field, f"{desc[field]!r} {why}"))

    if division not in DIVISIONS[kind]:
        bad("division", f"is not one of {', '.join(DIVISIONS[kind])}")
    status = str(desc.get("status") or "")
    if kind == "inference" and status.strip().lower() not in STATUSES:
        bad("status", f"is not one of {', '.join(STATUSES)}")
    if kind == "training" and status not in TRAINING_STATUSES.values():
        bad("status", f"is not one of {', '.join(repr(s) for s in TRAINING_STATUSES.values())}")
    if kind == "inference" and str(desc.get("system_type") or "") not in SYSTEM_TYPES:
        bad("system_type", f"is not one of {', '.join(SYSTEM_TYPES)}")
    for field in NUMERIC[kind]:
        try:
            number = int(str(desc.get(field, "")).strip())
        except ValueError:
            bad(field, "is not a whole number (the checker multiplies it)")
            continue
        if number < (1 if field != "accelerators_per_node" else 0):
            bad(field, "is too small")
    if kind == "inference" and division != "network" and is_network.lower() == "true":
        bad("is_network", "holds only in the network division")
    if kind == "inference" and division == "network" and is_network.lower() != "true":
        invalid.append(("is_network", f'{is_network!r} must be "true" in the network division'))
    return missing, invalid


def _typo(field: str, desc: Mapping[str, Any]) -> str:
    """A hint where the description holds a near-miss of a missing field's name (``coolng``)."""
    unknown = [k for k in desc if k not in _ALL_KNOWN]
    near = difflib.get_close_matches(field, unknown, n=1, cutoff=0.8)
    return f"; the TOML has {near[0]!r}: a typo?" if near else ""


def problems(desc: Mapping[str, Any], benchmark: str = "inference") -> list[str]:
    """Each field the checker would reject, by name and in words: missing or empty (with what to set in the
    system TOML), or an invalid value (a status, system type or division outside the allowed ones, a count
    ``int()`` cannot read). Empty when the description would pass."""
    missing, invalid = _issues(desc, benchmark)
    out = []
    for f in missing:
        what = "is missing" if f not in desc else "is empty"
        hint = f" ({HINTS[f]})" if f in HINTS else ""
        out.append(f'{f} {what}: set {f} = "..." in the system TOML{hint}{_typo(f, desc)}')
    out += [f"{f} {why}" for f, why in invalid]
    return out


def check(desc: Mapping[str, Any], benchmark: str = "inference") -> None:
    """Raise a UsageError, one line, naming every field to set or fix before the tree is written."""
    missing, invalid = _issues(desc, benchmark)
    if not missing and not invalid:
        return
    name = f"systems/{desc.get('system_name') or '<system>'}.json"
    parts = []
    if missing:
        parts.append(f"needs: {', '.join(missing)}")
    if invalid:
        parts.append(f"fix: {'; '.join(f'{f} {why}' for f, why in invalid)}")
    raise UsageError(f"{name} {'; '.join(parts)} (set them in --system-toml FILE)")
