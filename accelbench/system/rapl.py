"""CPU package and DRAM energy counters through Linux's powercap interface (Intel RAPL, and AMD's since 5.11).

Each ``intel-rapl:N`` zone is a package; a subzone named ``dram`` is its memory. (``core`` and ``uncore``
subzones are parts of the package and are not read: summing them would count twice.) The counters are
microjoules that wrap at ``max_energy_range_uj``; since Linux 5.10 (CVE-2020-8694) only root may read them.
Virtual machines and most containers expose no powercap at all. Every way of not reading them is said.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")

NO_POWERCAP = "unavailable: no powercap (virtual machine or container)"
NO_ZONE = "unavailable: no RAPL zone under /sys/class/powercap"
PERMISSION = "unavailable: permission (root needed since Linux 5.10)"


@dataclass(frozen=True)
class Zone:
    name: str  # "package-0", "dram-0"
    path: Path
    max_range_uj: float

    def read_joules(self) -> float:
        return int((self.path / "energy_uj").read_text().strip()) / 1e6


def zones(root: Path = POWERCAP) -> tuple[list[Zone], str | None]:
    """The readable package and DRAM zones, or none and the reason in a record's words."""
    if not root.is_dir():
        return [], NO_POWERCAP
    packages = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    if not packages:
        return [], NO_ZONE
    found: list[Zone] = []
    try:
        for pkg in packages:
            index = pkg.name.split(":")[1]
            found.append(_zone(pkg, f"package-{index}"))
            for sub in sorted(pkg.glob(f"intel-rapl:{index}:*")):
                if _name(sub) == "dram":
                    found.append(_zone(sub, f"dram-{index}"))
    except PermissionError:
        return [], PERMISSION
    except (OSError, ValueError) as exc:
        return [], f"unavailable: counter not readable ({exc})"
    return found, None


def _name(path: Path) -> str:
    try:
        return (path / "name").read_text().strip()
    except OSError:
        return ""


def _zone(path: Path, name: str) -> Zone:
    zone = Zone(name, path, int((path / "max_energy_range_uj").read_text().strip()) / 1e6)
    zone.read_joules()  # raises PermissionError where only root may read the counter
    return zone
