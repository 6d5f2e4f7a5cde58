"""The machine's disks as a system description lists them: how big each is and what kind, where Linux says.

MLCommons' system descriptions ask for the host's storage capacity and type. Only whole physical disks are
listed (``/sys/block`` minus the kernel's virtual devices: loop, zram, device-mapper, md), and a kind is named
only where the kernel's word for it holds: an NVMe namespace is an NVMe SSD, a SCSI/SATA disk is an SSD or an
HDD by its rotational flag. A virtual machine's disk (virtio, Xen) reports itself rotational whatever backs it,
so its kind is left unknown (None) rather than guessed.
"""

from __future__ import annotations

import os
from typing import Any

_SYS_BLOCK = "/sys/block"
#: disk name prefixes whose rotational flag says nothing about the medium behind them
_VIRTUAL_DISKS = ("vd", "xvd")


def disks(root: str = _SYS_BLOCK) -> list[dict[str, Any]]:
    """Each physical disk: ``{"bus": "nvme"|"virtio"|"xen"|"scsi"|..., "bytes": int, "type": str | None}``, largest
    first (empty where there is no ``/sys/block``). No device names or serial numbers are kept."""
    found: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        path = os.path.join(root, name)
        if "/virtual/" in os.path.realpath(path) or _read(path, "removable") == "1" or _mmc_part(name):
            continue
        sectors = _read(path, "size")
        if not sectors.isdigit() or int(sectors) == 0:
            continue
        found.append(
            {"bus": _bus(name), "bytes": int(sectors) * 512, "type": _kind(name, _read(path, "queue/rotational"))}
        )
    return sorted(found, key=lambda d: -int(d["bytes"]))


def _mmc_part(name: str) -> bool:
    """An eMMC's boot and RPMB areas, listed beside the disk itself."""
    return name.startswith("mmcblk") and ("boot" in name or "rpmb" in name)


def _bus(name: str) -> str:
    if name.startswith("nvme"):
        return "nvme"
    if name.startswith("xvd"):
        return "xen"
    if name.startswith("vd"):
        return "virtio"
    if name.startswith("sd"):
        return "scsi"
    if name.startswith("mmcblk"):
        return "mmc"
    return "other"


def _kind(name: str, rotational: str) -> str | None:
    if name.startswith("nvme"):
        return "NVMe SSD"
    if name.startswith(_VIRTUAL_DISKS) or rotational not in ("0", "1"):
        return None
    if name.startswith("mmcblk"):
        return "eMMC/SD flash"
    return "HDD" if rotational == "1" else "SSD"


def _read(path: str, leaf: str) -> str:
    try:
        with open(os.path.join(path, leaf), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""
