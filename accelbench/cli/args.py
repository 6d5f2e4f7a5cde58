"""Argument parsing shared by every command: one-line errors, common options, list values."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn

from accelbench.devices import check_device_name
from accelbench.devices.kind import BUILTIN, ENV
from accelbench.errors import UsageError

_TAG_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")

#: what flags are added to: a parser or one of its argument groups (argparse's common base of the two)
Flags = argparse._ActionsContainer


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump) that says where to look."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def list_of(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    """A comma-separated list whose elements are each parsed by ``kind``: ``--m 512,1024``."""

    def parse(text: str) -> list[Any]:
        parts = [p.strip() for p in text.split(",")]
        if not all(parts):
            raise argparse.ArgumentTypeError(f"empty element in list {text!r}")
        out: list[Any] = []
        for p in parts:
            # ranges are for numbers; a name may hold a colon (package.module:Class)
            out += int_range(p) if ":" in p and kind is not str else [kind(p)]
        return out

    parse.__name__ = f"list of {getattr(kind, '__name__', 'values')}"
    return parse


def int_range(text: str) -> list[int]:
    """``START:STOP:xF`` (geometric) or ``START:STOP:+S`` (arithmetic), both ends included."""
    try:
        start_s, stop_s, step_s = text.split(":")
        start, stop = int(start_s), int(stop_s)
        geometric = step_s.startswith("x")
        step = int(step_s[1:]) if step_s[:1] in ("x", "+") else int(step_s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad range {text!r}: write START:STOP:xFACTOR or START:STOP:+STEP") from None
    if start < 1 or stop < start or step < (2 if geometric else 1):
        raise argparse.ArgumentTypeError(f"bad range {text!r}: need 1 <= START <= STOP and a step that grows")
    values: list[int] = []
    v = start
    while v <= stop and len(values) < 1000:
        values.append(v)
        v = v * step if geometric else v + step
    return values


def device_name(text: str) -> str:
    try:
        return check_device_name(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_pairs(p: Flags, flag: str, help: str) -> None:
    """A repeatable ``KEY=VALUE`` flag (tags, parameter filters): a list of (key, value) pairs."""
    p.add_argument(flag, type=tag, action="append", default=[], metavar="KEY=VALUE", help=help)


def tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not _TAG_KEY.match(key) or not value:
        raise argparse.ArgumentTypeError(f"tags are KEY=VALUE with KEY of letters, digits, _.- (got {text!r})")
    return key, value


def add_store_option(p: Flags) -> None:
    p.add_argument(
        "--db",
        type=Path,
        metavar="PATH",
        help="results store (SQLite file); default $ACCELBENCH_HOME/accelbench.db or ~/.local/share/accelbench/",
    )


def add_common_options(p: argparse.ArgumentParser) -> None:
    """The options every measuring command takes."""
    g = p.add_argument_group("common options")
    g.add_argument(
        "--device",
        type=device_name,
        metavar="DEV",
        help=f"auto (default: an accelerator if one is found, else cpu), or a kind with an optional index (cuda:1): "
        f"{', '.join(sorted(BUILTIN))}; a kind of one's own through ${ENV}",
    )
    add_store_option(g)
    g.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        default=Path("accelbench-runs"),
        help="parent of run folders (default ./accelbench-runs)",
    )
    add_pairs(g, "--tag", "label the results, repeatable (e.g. --tag nvlink=off)")
    g.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would run, with each timeout and how long it took on this system last time; run nothing",
    )
    g.add_argument(
        "--json",
        action="store_true",
        help="print the run and its records as JSON on stdout (progress goes to stderr)",
    )
    g.add_argument(
        "--threads", type=positive_int, metavar="N", help="CPU threads for torch (default: torch's choice, recorded)"
    )
    g.add_argument(
        "--timeout",
        type=positive_float,
        metavar="S",
        help="seconds before a benchmark is killed and recorded as failed",
    )
    add_price_options(p)


def add_repeat_option(p: argparse.ArgumentParser) -> None:
    """``--repeat N`` for the commands that run a suite (tune confirms its own candidates: ``--repeats``)."""
    p.add_argument(
        "--repeat",
        type=positive_int,
        default=1,
        metavar="N",
        help="run everything N times, in rounds, each run its own process: compare and history then judge a "
        "change against the spread between runs, not only within one (default 1)",
    )


def add_price_options(p: argparse.ArgumentParser) -> None:
    """One way of pricing the machine; each record then carries the price and its per-dollar figures."""
    g = p.add_argument_group(
        "price (one of; else config.toml's; none: no per-dollar figures)",
        "Records made with a price keep it, with its source, and add per-dollar figures: training and Offline "
        "samples per USD/h, per USD and USD per million; Server USD per million queries; language models USD per "
        "million output and input tokens; tta cost to target.",
    )
    g.add_argument("--price-per-hour", type=float, metavar="USD", help="what an hour of this machine costs")
    g.add_argument(
        "--instance",
        metavar="NAME",
        help="a cloud instance of the shipped, dated price table (accelbench reference --prices), e.g. p5.48xlarge; "
        "refused where its accelerators are not what the run measures",
    )
    g.add_argument(
        "--price-mismatch-ok",
        action="store_true",
        help="price the run as --instance (or config.toml's instance) although its hardware differs from the "
        "measured device; the records say so",
    )
    g.add_argument("--purchase-price", type=float, metavar="USD", help="an owned machine: what it cost to buy")
    g.add_argument(
        "--amortize-years", type=float, metavar="N", help="with --purchase-price: years of round-the-clock use"
    )
    g.add_argument(
        "--power-cost-kwh",
        type=float,
        metavar="USD",
        help="with --purchase-price: electricity per kWh, at the power each benchmark's window measured, else at "
        "--board-watts (stated, labelled nominal); where neither exists it is left out, and said",
    )
    g.add_argument("--board-watts", type=float, metavar="W", help="with --power-cost-kwh: the machine's stated draw")
