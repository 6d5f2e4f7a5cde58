"""MLCommons' systems/<system>.json from accelbench's own profile: what is captured, what the user's TOML adds, and
what problems()/check() name before MLCommons' checker would."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import UsageError
from accelbench.results.runfolder import RunFolder
from accelbench.submission import system_rules as rules
from accelbench.submission import systems
from accelbench.system import cpu, disks

#: a literal copy of SYSTEM_DESC_REQUIRED_FIELDS in mlcommons/inference
#: tools/submission/submission_checker/constants.py (the checker is not imported in CI)
CHECKER_REQUIRED = [
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
]

#: what no program reads on a CPU-only host: what a user's TOML supplies
USER_TOML = """
cooling = "air"
host_memory_configuration = "3x 8GB DDR5"
host_storage_type = "NVMe SSD"
host_networking = "N/A"
host_networking_topology = "N/A"
host_network_card_count = 1
host_processor_model_name = "AMD EPYC 9R14"
hw_notes = "a cloud VM"
"""

ARGS: dict[str, Any] = {"submitter": "Acme", "division": "closed", "system_name": "acme_vm"}


@pytest.fixture
def system_json(tmp_path: Path, profile: dict[str, Any]) -> dict[str, Any]:
    """The run folder's system.json as the suite runner writes it, read back."""
    folder = RunFolder(tmp_path, "run")
    folder.write_json("system.json", profile)
    loaded: dict[str, Any] = json.loads((folder.path / "system.json").read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def user(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "system.toml"
    path.write_text(USER_TOML, encoding="utf-8")
    return systems.load_user(path)


def test_required_is_the_inference_checkers_list() -> None:
    assert list(rules.REQUIRED) == CHECKER_REQUIRED and len(rules.REQUIRED) == 35
    assert rules.MEANINGFUL <= set(rules.REQUIRED)
    # Training (mlperf-logging's system_desc_checker) asks for the vCPU count and not for three of Inference's
    training = set(rules.TRAINING_REQUIRED)
    assert training - set(rules.REQUIRED) == {"host_processor_vcpu_count"}
    assert set(rules.REQUIRED) - training == {"system_type", "system_type_detail", "host_network_card_count"}


def test_describe_fills_what_the_profile_captured(system_json: dict[str, Any], profile: dict[str, Any]) -> None:
    desc = systems.describe(system_json, **ARGS, loadgen_version="6.0.17 @ d6147c7eb7")
    assert list(desc)[: len(rules.REQUIRED)] == list(rules.REQUIRED)
    assert all(isinstance(v, str) for v in desc.values())
    assert desc["submitter"] == "Acme" and desc["division"] == "closed" and desc["system_name"] == "acme_vm"
    assert desc["status"] == "available" and desc["system_type"] == "datacenter" and "is_network" not in desc
    assert desc["number_of_nodes"] == "1"
    assert desc["host_processor_model_name"] == profile["cpu"]["model"]
    assert desc["host_memory_capacity"] == f"{round(profile['memory']['total_bytes'] / 2**30)} GB"
    sockets = profile["cpu"]["sockets"]
    if sockets:
        assert desc["host_processors_per_node"] == str(sockets)
        assert desc["host_processor_core_count"] == str(profile["cpu"]["physical_cores"] // sockets)
    if profile["cpu"]["clock_ghz"]:
        assert desc["host_processor_frequency"] == f"{profile['cpu']['clock_ghz']:.2f} GHz"
    if profile["cpu"]["caches"]:
        assert desc["host_processor_caches"].startswith("L1")
    torch_version = profile["torch"]["version"].split("+")[0]
    assert desc["framework"].startswith(f"PyTorch {torch_version}, accelbench ")
    assert desc["operating_system"] == f"{profile['os']['name']}, kernel {profile['os']['kernel']}"
    assert desc["other_software_stack"].startswith(f"Python {profile['python']['version']}")
    assert "MLPerf LoadGen 6.0.17 @ d6147c7eb7" in desc["other_software_stack"]
    if not profile["accelerators"]:  # as MLCommons' published CPU-only systems write them
        assert desc["accelerators_per_node"] == "0"
        assert all(desc[f] == "N/A" for f in rules.REQUIRED if f.startswith("accelerator_"))
    else:
        assert desc["accelerators_per_node"] == str(len(profile["accelerators"]))
    if profile["storage"]:
        assert desc["host_storage_capacity"]


def test_the_user_toml_overrides_and_supplies_the_rest(system_json: dict[str, Any], user: dict[str, Any]) -> None:
    if system_json["accelerators"]:  # what NVML cannot say reliably: the user says it on a GPU host
        user |= {"accelerator_host_interconnect": "PCIe Gen5 x16", "accelerator_memory_configuration": "HBM3"}
        user |= {"accelerator_interconnect": "N/A"}
    desc = systems.describe(system_json, **ARGS, user=user)
    assert desc["host_processor_model_name"] == "AMD EPYC 9R14"  # the TOML wins over the profile
    assert desc["host_network_card_count"] == "1"  # a TOML number is written as a string
    assert desc["cooling"] == "air" and desc["hw_notes"] == "a cloud VM"
    assert rules.problems(desc) == []
    rules.check(desc)


def test_problems_name_each_missing_and_invalid_field(system_json: dict[str, Any]) -> None:
    desc = systems.describe(system_json, **ARGS)
    found = rules.problems(desc)
    named = {p.split()[0] for p in found}
    for field in ("cooling", "host_memory_configuration", "host_networking", "host_networking_topology"):
        assert field in named
        assert any(p.startswith(f"{field} is empty: set {field} = ") for p in found)
    assert "host_network_card_count" in named
    assert "framework" not in named and "host_memory_capacity" not in named  # captured

    bad = desc | {"status": "beta", "system_type": "cloud", "number_of_nodes": "two"}
    del bad["sw_notes"]
    found = rules.problems(bad)
    assert "status 'beta' is not one of available, preview, rdi" in found
    assert "system_type 'cloud' is not one of datacenter, edge, datacenter,edge, edge,datacenter" in found
    assert any(p.startswith("number_of_nodes 'two' is not a whole number") for p in found)
    assert any(p.startswith("sw_notes is missing") for p in found)  # may be empty, but must be there
    assert rules.problems(desc | {"status": "Preview", "division": "open"}) == rules.problems(desc)
    assert any(p.startswith("division 'beta'") for p in rules.problems(desc | {"division": "beta"}))


def test_check_raises_one_line_naming_every_field(system_json: dict[str, Any]) -> None:
    desc = systems.describe(system_json, **ARGS) | {"status": "beta"}
    with pytest.raises(UsageError) as caught:
        rules.check(desc)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("systems/acme_vm.json needs: ")
    assert message.endswith("(set them in --system-toml FILE)")
    for field in ("cooling", "host_memory_configuration", "host_networking", "host_network_card_count", "status"):
        assert field in message


def test_no_hostname_or_path_reaches_the_json(system_json: dict[str, Any], user: dict[str, Any]) -> None:
    hostname = system_json["hostname"]
    text = json.dumps(systems.describe(system_json, **ARGS, user=user))
    assert not re.search(rf"\b{re.escape(hostname)}\b", text), hostname
    # and a name that could not appear by chance, with the executable under a home folder
    marked = system_json | {"hostname": "node-7f3a.example.internal"}
    marked["python"] = {**system_json["python"], "executable": "/home/alice/venv/bin/python"}
    for bench in ("inference", "training"):
        text = json.dumps(systems.describe(marked, **ARGS, benchmark=bench))
        assert "7f3a" not in text and "/home" not in text and "alice" not in text and "/root" not in text


def test_load_user_names_the_file_and_the_problem(tmp_path: Path) -> None:
    cases = {
        "bad.toml": ("cooling = air\n", "is not valid TOML"),
        "table.toml": ('[host]\ncooling = "air"\n', "[host] is a table"),
        "list.toml": ('cooling = ["air", "liquid"]\n', "cooling is a list"),
    }
    for name, (content, why) in cases.items():
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        with pytest.raises(UsageError) as caught:
            systems.load_user(path)
        assert str(path) in str(caught.value) and why in str(caught.value)
    with pytest.raises(UsageError, match="no such file"):
        systems.load_user(tmp_path / "absent.toml")


def test_a_near_miss_in_the_toml_is_pointed_out(system_json: dict[str, Any]) -> None:
    desc = systems.describe(system_json, **ARGS, user={"coolng": "air"})
    assert any(p.startswith("cooling is empty") and "'coolng': a typo?" in p for p in rules.problems(desc))


def test_the_toml_cannot_contradict_the_tree(system_json: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match="division"):
        systems.describe(system_json, **ARGS, user={"division": "open"})
    same = systems.describe(system_json, **ARGS, user={"submitter": "ACME"})  # the checker ignores case
    assert same["submitter"] == "Acme"


def test_training_needs_its_own_fields_and_status(system_json: dict[str, Any], user: dict[str, Any]) -> None:
    desc = systems.describe(system_json, **ARGS, user=user, benchmark="training")
    assert set(desc) - set(rules.TRAINING_REQUIRED) == {"host_network_card_count"}  # the TOML's own is kept
    assert set(rules.TRAINING_REQUIRED) <= set(desc) and "system_type" not in desc
    assert desc["host_processor_vcpu_count"] == str(system_json["cpu"]["logical_cores"])
    assert desc["status"] == "Available on-premise"
    if not system_json["accelerators"]:
        assert rules.problems(desc, "training") == []
    cloud = systems.describe(system_json, **ARGS, status="cloud", benchmark="training")
    assert cloud["status"] == "Available cloud"
    found = rules.problems(desc | {"status": "beta", "host_processors_per_node": "2 sockets"}, "training")
    assert any(p.startswith("status 'beta' is not one of 'Available on-premise'") for p in found)
    assert any(p.startswith("host_processors_per_node '2 sockets' is not a whole number") for p in found)
    with pytest.raises(UsageError, match="network"):
        rules.check(desc | {"division": "network"}, "training")


def test_the_network_division_asks_for_the_network_fields(system_json: dict[str, Any], user: dict[str, Any]) -> None:
    desc = systems.describe(system_json, **(ARGS | {"division": "network"}), user=user)
    assert desc["is_network"] == "true"
    named = {p.split()[0] for p in rules.problems(desc)}
    assert set(rules.NETWORK_FIELDS) - {"is_network"} <= named
    # is_network = false elsewhere is dropped: the checker would require the network fields for any non-empty value
    closed = systems.describe(system_json, **ARGS, user=user | {"is_network": False})
    assert "is_network" not in closed
    assert any(p.startswith("is_network") for p in rules.problems(closed | {"is_network": "true"}))


def test_a_gpu_host_from_its_profile(system_json: dict[str, Any]) -> None:
    gpu = {"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85520809984, "driver": "550.54.15"}
    gpu |= {"max_sm_clock_mhz": 1980, "kind": "cuda", "vendor": "NVIDIA"}
    accelerators = [{"index": i, **gpu} for i in range(8)]
    accelerators[0]["topology"] = "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X "
    profile = system_json | {"accelerators": accelerators}
    profile["torch"] = {**system_json["torch"], "cuda": "12.4", "cudnn": 90100}
    desc = systems.describe(profile, **ARGS)
    assert desc["accelerators_per_node"] == "8"
    assert desc["accelerator_model_name"] == "NVIDIA H100 80GB HBM3"
    assert desc["accelerator_memory_capacity"] == "80 GB"  # the datasheet's, not the 79.6 GiB torch sees
    assert desc["accelerator_memory_configuration"] == "HBM3"
    assert desc["accelerator_frequency"] == "1980 MHz"
    assert desc["accelerator_interconnect"] == "NVLink"
    assert "CUDA 12.4, cuDNN 9.1.0, driver 550.54.15" in desc["other_software_stack"]
    named = {p.split()[0] for p in rules.problems(desc)}
    assert "accelerator_host_interconnect" in named  # NVML's current PCIe link idles down: the user says it


def test_an_older_profile_from_another_machine_leaves_the_new_facts_to_the_user(
    system_json: dict[str, Any],
) -> None:
    old = {k: v for k, v in system_json.items() if k != "storage"} | {"hostname": "elsewhere-1"}
    old["cpu"] = {k: v for k, v in system_json["cpu"].items() if k not in ("sockets", "caches")}
    desc = systems.describe(old, **ARGS)
    assert desc["host_processors_per_node"] == "" and desc["host_processor_caches"] == ""
    assert desc["host_storage_capacity"] == ""
    named = {p.split()[0] for p in rules.problems(desc)}
    assert {"host_processors_per_node", "host_processor_core_count", "host_storage_capacity"} <= named
    record = {"fingerprint": "f00d", "profile": system_json}  # a record's system section reads the same
    assert systems.describe(record, **ARGS) == systems.describe(system_json, **ARGS)


def test_the_capture_reads_sysfs(tmp_path: Path) -> None:
    index = tmp_path / "cpu" / "cpu0" / "cache"
    for i, (level, kind, size, shared) in enumerate(
        [("1", "Data", "48K", "0,56"), ("1", "Instruction", "32K", "0,56"), ("2", "Unified", "2048K", "0,56")]
        + [("3", "Unified", "107520K", "0-55,112-167")]
    ):
        d = index / f"index{i}"
        d.mkdir(parents=True)
        for leaf, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / leaf).write_text(value + "\n")
    for n, package in enumerate(["0", "0", "1", "1"]):
        (tmp_path / "cpu" / f"cpu{n}" / "topology").mkdir(parents=True)
        (tmp_path / "cpu" / f"cpu{n}" / "topology" / "physical_package_id").write_text(package)
    found = cpu.caches(str(tmp_path / "cpu"))
    assert found[0] == {"level": 1, "type": "Data", "size_bytes": 48 * 2**10, "shared_cpus": 2}
    assert found[3]["shared_cpus"] == 112 and cpu.sockets(str(tmp_path / "cpu")) == 2
    words = systems._caches(found, {"logical_cores": 224, "physical_cores": 112}, 2)
    assert words == "L1d 48 KiB per core, L1i 32 KiB per core, L2 2 MiB per core, L3 105 MiB per socket"

    block = tmp_path / "block"
    (tmp_path / "devices" / "virtual" / "block" / "loop0").mkdir(parents=True)
    (tmp_path / "devices" / "virtual" / "block" / "loop0" / "size").write_text("2048")
    block.mkdir()
    (block / "loop0").symlink_to(tmp_path / "devices" / "virtual" / "block" / "loop0")
    for name, sectors, rotational in (("nvme0n1", "7501476528", "0"), ("vda", "536870912", "1")):
        (block / name / "queue").mkdir(parents=True)
        (block / name / "size").write_text(sectors)
        (block / name / "queue" / "rotational").write_text(rotational)
    assert disks.disks(str(block)) == [
        {"bus": "nvme", "bytes": 7501476528 * 512, "type": "NVMe SSD"},
        {"bus": "virtio", "bytes": 536870912 * 512, "type": None},  # a VM's disk: its kind is not guessed
    ]
