"""The price of an hour of the machine: stated, an owned machine's amortisation, or a named cloud instance.

DAWNBench's reviewers had to ask submitters where their $/hour came from; here every price says it in
``source``, and an energy part computed from a stated board power is labelled nominal, never measured.
"""

from __future__ import annotations

import csv
import difflib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from accelbench.errors import UsageError

HOURS_PER_YEAR = 8760


@dataclass(frozen=True)
class Price:
    """USD per hour of the whole machine, and where the figure comes from."""

    usd_per_hour: float
    #: stated (a figure the user gave), owned (purchase / (years x 8,760 h) [+ energy]), instance (the table)
    method: str
    #: one line a reader can check: the flag or file it came from, or the table row's source and date
    source: str
    #: the parts of an owned machine's hourly cost (hardware, energy), USD per hour
    parts: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: an owned machine's electricity price, applied to the power measured in each benchmark's window
    power_cost_kwh: float | None = None
    #: who stated the price: the flag, or the settings file's path (printed at the start of a run)
    origin: str = ""
    #: the instance table row's name, where the price is one (its hardware is checked against the run's)
    instance: str = ""
    #: the instance's hardware differs from what the run measured, priced anyway (--price-mismatch-ok)
    mismatch: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "usd_per_hour": self.usd_per_hour,
            "method": self.method,
            "source": self.source,
            "parts": dict(self.parts),
            "notes": list(self.notes),
            "power_cost_kwh": self.power_cost_kwh,
        }
        out |= {
            k: v for k, v in (("origin", self.origin), ("instance", self.instance), ("mismatch", self.mismatch)) if v
        }
        return out

    @property
    def electricity_dropped(self) -> bool:
        """An electricity price was given, but no energy went into this price (none measured, none stated)."""
        return self.power_cost_kwh is not None and "energy" not in self.parts

    def at_power(self, watts: float | None) -> "Price":
        """This price for one benchmark: its measured average power replaces a stated board power."""
        if self.power_cost_kwh is None or watts is None:
            return self
        hardware = self.parts.get("hardware", self.usd_per_hour)
        energy = watts / 1000 * self.power_cost_kwh
        source = self.source.split(" + ")[0] + f" + measured {watts:.3g} W at {self.power_cost_kwh:g} USD/kWh"
        note = "energy from the average power measured in this benchmark's window (board/package counters)"
        notes = (note, *(n for n in self.notes if n.startswith("priced with --price-mismatch-ok")))
        return replace(self, usd_per_hour=hardware + energy, source=source,
                       parts={"hardware": hardware, "energy": energy}, notes=notes)  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Price":
        return cls(
            float(d["usd_per_hour"]),
            str(d.get("method", "stated")),
            str(d.get("source", "")),
            {k: float(v) for k, v in (d.get("parts") or {}).items()},
            tuple(d.get("notes") or ()),
            d.get("power_cost_kwh"),
            str(d.get("origin", "")),
            str(d.get("instance", "")),
            str(d.get("mismatch", "")),
        )


@dataclass(frozen=True)
class Instance:
    provider: str
    name: str
    region: str
    accelerator: str
    count: int
    usd_per_hour: float
    read_on: str
    source: str


@lru_cache(maxsize=1)
def instances() -> tuple[Instance, ...]:
    """The shipped, dated price table (``cost/data/instances.csv``): each row with the page it was read from."""
    text = resources.files("accelbench.cost").joinpath("data/instances.csv").read_text(encoding="utf-8")
    return tuple(
        Instance(
            row["provider"],
            row["instance"],
            row["region"],
            row["accelerator"],
            int(row["count"]),
            float(row["usd_per_hour"]),
            row["read_on"],
            row["source"],
        )
        for row in csv.DictReader(text.splitlines())
    )


def stated(usd_per_hour: float, where: str) -> Price:
    """A price the user gave; ``where`` says how (the flag, the config file)."""
    _positive(usd_per_hour, "--price-per-hour")
    return Price(float(usd_per_hour), "stated", where)


def instance(name: str) -> Price:
    by_name = {i.name.lower(): i for i in instances()}
    row = by_name.get(name.lower())
    if row is None:
        close = difflib.get_close_matches(name.lower(), list(by_name), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(by_name[c].name for c in close)}?" if close else ""
        raise UsageError(
            f"unknown instance {name!r}{hint} (see 'accelbench reference --prices'; or give --price-per-hour USD)"
        )
    where = f" {row.region}" if row.region else ""
    return Price(
        row.usd_per_hour,
        "instance",
        f"{row.provider} {row.name}{where} ({row.count}x {row.accelerator}), "
        f"as read on {row.read_on} from {row.source}",
        notes=(f"a list price read on {row.read_on}; check today's price before relying on it",),
        origin=f"--instance {row.name}",
        instance=row.name,
    )


def instance_row(name: str) -> Instance | None:
    """The table's row of this instance (any case), or None."""
    return next((i for i in instances() if i.name.lower() == name.lower()), None)


def owned(
    purchase_usd: float, years: float, power_cost_kwh: float | None = None, board_watts: float | None = None
) -> Price:
    """Purchase spread over ``years`` of round-the-clock use, plus electricity: at the power measured in each
    benchmark's window where it is measured, else at a stated board power (labelled nominal), else not at all
    (said)."""
    _positive(purchase_usd, "--purchase-price")
    _positive(years, "--amortize-years")
    hardware = purchase_usd / (years * HOURS_PER_YEAR)
    parts = {"hardware": hardware}
    notes: list[str] = []
    source = f"purchase {purchase_usd:,.0f} USD over {years:g} years x {HOURS_PER_YEAR:,} h"
    if board_watts is not None and power_cost_kwh is None:
        raise UsageError("--board-watts prices electricity: add --power-cost-kwh USD")
    if power_cost_kwh is not None:
        _positive(power_cost_kwh, "--power-cost-kwh")
        if board_watts is not None:
            _positive(board_watts, "--board-watts")
            parts["energy"] = board_watts / 1000 * power_cost_kwh
            source += f" + {board_watts:g} W at {power_cost_kwh:g} USD/kWh"
            notes.append(f"energy from a stated {board_watts:g} W (nominal, not measured)")
        else:
            notes.append("energy not included where it was not measured (no --board-watts stated)")
    return Price(sum(parts.values()), "owned", source, parts, tuple(notes), power_cost_kwh)


def from_options(
    *,
    price_per_hour: float | None = None,
    instance_name: str | None = None,
    purchase_price: float | None = None,
    amortize_years: float | None = None,
    power_cost_kwh: float | None = None,
    board_watts: float | None = None,
    config: dict[str, Any] | None = None,
    config_where: str = "config.toml",
) -> Price | None:
    """The one price these options give (exactly one way of stating it), else the config file's, else None."""
    ways = [
        name
        for name, given in (
            ("--price-per-hour", price_per_hour is not None),
            ("--instance", instance_name is not None),
            ("--purchase-price", purchase_price is not None),
        )
        if given
    ]
    if len(ways) > 1:
        raise UsageError(f"give one price: {' and '.join(ways)} both state one")
    if (amortize_years is not None) != (purchase_price is not None):
        raise UsageError("--purchase-price and --amortize-years go together (an owned machine's price)")
    if purchase_price is None and (power_cost_kwh is not None or board_watts is not None):
        given = [f for f, v in (("--power-cost-kwh", power_cost_kwh), ("--board-watts", board_watts)) if v is not None]
        raise UsageError(
            f"{' and '.join(given)} price an owned machine's electricity: add --purchase-price and --amortize-years"
        )
    if price_per_hour is not None:
        return replace(stated(price_per_hour, f"--price-per-hour {price_per_hour:g}"), origin="--price-per-hour")
    if instance_name is not None:
        return instance(instance_name)
    if purchase_price is not None and amortize_years is not None:
        return replace(owned(purchase_price, amortize_years, power_cost_kwh, board_watts), origin="--purchase-price")
    return _from_config(config or {}, config_where)


_CONFIG_KEYS = {"price_per_hour", "instance", "purchase_price", "amortize_years", "power_cost_kwh", "board_watts"}


def _from_config(config: dict[str, Any], where: str) -> Price | None:
    given = {k: v for k, v in config.items() if k in _CONFIG_KEYS}
    if not given:
        return None
    for k, v in given.items():
        wanted = str if k == "instance" else (int, float)
        if not isinstance(v, wanted) or isinstance(v, bool):
            raise UsageError(f"{k} in {where} must be a {'name' if k == 'instance' else 'number'}, got {v!r}")
    try:
        price = from_options(
            price_per_hour=given.get("price_per_hour"),
            instance_name=given.get("instance"),
            purchase_price=given.get("purchase_price"),
            amortize_years=given.get("amortize_years"),
            power_cost_kwh=given.get("power_cost_kwh"),
            board_watts=given.get("board_watts"),
            config={},
        )
    except UsageError as exc:
        text = str(exc)
        for k in _CONFIG_KEYS:  # say it in the file's own words
            text = text.replace("--" + k.replace("_", "-"), k)
        raise UsageError(f"{where}: {text}") from None
    if price is not None and price.method == "stated":
        price = Price(price.usd_per_hour, "stated", f"price_per_hour = {price.usd_per_hour:g} in {where}")
    return replace(price, origin=where) if price is not None else None


def _positive(value: float, what: str) -> None:
    if not value > 0:
        raise UsageError(f"{what} must be a positive number, got {value:g}")
