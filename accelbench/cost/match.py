"""Whether a named instance's price describes the hardware a run measures.

An instance's price is its accelerators' (``p5.48xlarge``: 8x H100), so on a CPU-only run or one A100 every
per-dollar figure would be a fiction that ``compare`` then sets against another. A mismatch is refused before
anything is measured (``--price-mismatch-ok`` prices it anyway, and the record says so); what is compared (the
chip, the memory, the count) is in docs/cost.md."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Sequence

from accelbench.cost.price import Instance, Price, instance_row
from accelbench.devices import resolve_device
from accelbench.devices.kind import accelerators
from accelbench.errors import UsageError

#: how far a device's reported memory may sit from the table's marketed figure (GB vs GiB, reserved memory)
MEMORY_TOLERANCE = 0.15


@dataclass(frozen=True)
class Measured:
    """What a run measures: the device type it runs on and the accelerators this machine shows."""

    device_type: str
    #: (name, memory in bytes or None) of each accelerator visible to the run
    accelerators: tuple[tuple[str, int | None], ...] = ()


def measured(device: str | None) -> Measured:
    """The device a run of ``--device`` (None: auto) measures, and the accelerators visible (imports torch).

    A suite whose entries name their own devices is judged by the run's ``--device`` (auto: a GPU where one
    is visible), which is the device its entries resolve to unless an entry says otherwise.
    """
    kind = resolve_device(device or "auto").type
    accs = tuple((k.label(d), k.total_memory(d)) for k, _, d in accelerators())  # every kind's, as it names them
    return Measured(kind, accs)


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[^0-9a-z]+", name.lower()) if w}


def _chip(accelerator: str) -> str:
    """'H100 SXM5 80GB' -> 'h100': the table's first word with a digit (the chip), never a memory size."""
    for w in re.split(r"[^0-9A-Za-z]+", accelerator):
        if any(c.isdigit() for c in w) and not re.fullmatch(r"\d+GB", w, re.IGNORECASE):
            return w.lower()
    return accelerator.lower()


def mismatch(row: Instance, run: Measured) -> str | None:
    """Why ``row``'s hardware is not what ``run`` measures (one clause), or None where it is."""
    has = f"{row.name} has {row.count}x {row.accelerator}"
    if run.device_type == "cpu" or not run.accelerators:
        return f"{has}; this run measures the CPU" + ("" if run.accelerators else " (no accelerator visible)")
    names: dict[str, int] = {}
    for name, _ in run.accelerators:
        names[name] = names.get(name, 0) + 1
    here = ", ".join(f"{n}x {name}" for name, n in names.items())
    chip = _chip(row.accelerator)
    if any(chip not in _words(name) for name, _ in run.accelerators):
        return f"{has}; this machine has {here}"
    gb = re.search(r"(\d+)\s*GB", row.accelerator, re.IGNORECASE)
    if gb:
        want = float(gb.group(1))
        for name, memory in run.accelerators:
            if memory and abs(memory / 2**30 - want) > MEMORY_TOLERANCE * want:
                return f"{has}; this machine's {name} reports {memory / 2**30:.0f} GiB"
    if len(run.accelerators) != row.count:
        return f"{has}; {len(run.accelerators)} visible to this run ({here})"
    return None


def checked(price: Price, run: Measured, ok: bool = False) -> Price:
    """``price`` where it fits ``run``; a mismatched instance is refused, or (``ok``) kept and labelled."""
    if not price.instance:
        return price
    row = instance_row(price.instance)
    why = mismatch(row, run) if row is not None else None
    if why is None:
        return price
    stated_by = price.origin if price.origin.startswith("--") else f'instance = "{price.instance}" in {price.origin}'
    if not ok:
        raise UsageError(
            f"{stated_by} does not price what this run measures: {why} (state this machine's price with "
            "--price-per-hour, or give --price-mismatch-ok to price it as the instance anyway)"
        )
    note = f"priced with --price-mismatch-ok: {why}"
    return replace(price, mismatch=why, notes=(*price.notes, note))


def describe(price: Price, readable: Sequence[str] = ()) -> list[str]:
    """The lines a run prints about its price: where it came from when a file stated it, dropped electricity.

    ``readable`` names the energy domains this machine can read; with none, an electricity price without
    ``--board-watts`` cannot enter any record, and that is said here rather than only in the JSON.
    """
    lines = []
    if price.origin and not price.origin.startswith("--"):
        where = price.source if price.origin in price.source else f"{price.origin}: {price.source}"
        lines.append(
            f"price: {price.usd_per_hour:,.4g} USD/h, {where}; applied to training, inference and time-to-accuracy "
            "records (kernels are not priced); a price flag overrides it"
        )
    if price.mismatch:
        lines.append(f"price: {price.mismatch}, priced anyway (--price-mismatch-ok): the records say so")
    if price.electricity_dropped and not readable:
        lines.append(
            f"electricity not priced: {price.power_cost_kwh:g} USD/kWh applies to the power measured in each "
            "benchmark's window, and no energy counter can be read here; add --board-watts W to price a stated "
            "draw (labelled nominal)"
        )
    return lines
