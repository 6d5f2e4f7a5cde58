"""What MLCommons' checkers require of a system description (``systems/<system>.json``), read as a spec: the
fields each checker asks for, which must be non-empty, the allowed values, and the judgement of a description
against them (:func:`problems`, :func:`check`), so a tree is refused by field name before MLCommons' checker
would. Sources: ``SYSTEM_DESC_*`` in mlcommons/inference's submission checker (constants.py, checks/system_check.py)
and mlperf-logging 4.1.68's ``system_desc_checker`` (Training); docs/mlperf-rules.md §5."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal

from accelbench.errors import UsageError

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


def kind_of(benchmark: str) -> Benchmark:
    """The checker a benchmark's description answers to (a UsageError for another)."""
    if benchmark == "inference":
        return "inference"
    if benchmark == "training":
        return "training"
    raise UsageError(f"no MLCommons system description for {benchmark!r}: inference or training")


def required_fields(benchmark: str = "inference", *, network: bool = False) -> tuple[str, ...]:
    """The keys a system description must hold for ``benchmark`` (and the network division's, for Inference)."""
    kind = kind_of(benchmark)
    fields = REQUIRED if kind == "inference" else TRAINING_REQUIRED
    return fields + NETWORK_FIELDS if network and kind == "inference" else fields


def _issues(desc: Mapping[str, Any], benchmark: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(the fields missing or empty, (field, what is wrong with its value) for each invalid one)."""
    kind = kind_of(benchmark)
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
