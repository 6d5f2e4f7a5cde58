"""Command-line flags built from a kernel's parameter dataclass, and the entries they describe.

Each kernel declares its knobs once (:func:`accelbench.params.opt`); this module
turns them into flags with the same words for every kernel, and turns parsed
flags, ``--set``/``--limit`` and ``--sweep`` into suite entries.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from accelbench.cli import args as a
from accelbench.errors import UsageError
from accelbench.kernels.sets import load_set, sets_for
from accelbench.params import CommonParams, KernelParams, Parts, check_choice, typed_by_person
from accelbench.suite.suites import Entry, expand, make_entry

#: Fields whose flags come from the common options (--device, --threads).
BASE_FIELDS = frozenset(f.name for f in fields(CommonParams))
#: Fields every kernel shares: flags in a "measurement" group of their own.
MEASUREMENT_FIELDS = frozenset(f.name for f in fields(KernelParams)) - BASE_FIELDS


def _flag(f: dataclasses.Field[Any]) -> str:
    flag: str = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
    return flag


def _element_parser(
    f: dataclasses.Field[Any], hint: Any, choices: tuple[str, ...] | None = None
) -> Callable[[str], Any]:
    allowed: tuple[str, ...] | None = choices or f.metadata.get("choices")
    if allowed:

        def choice(text: str) -> str:
            try:
                return check_choice(f.name, text, allowed)
            except UsageError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None

        choice.__name__ = "choice"
        return choice
    inner = [t for t in typing.get_args(hint) if t is not type(None)] or [hint]
    base = inner[0]
    if base is int:
        return _int
    if base is float:
        return _float
    if f.metadata.get("metavar") in PATH_METAVARS:
        return _path
    return str


#: the metavars of fields that name a file or folder: kept absolute, so a record says which one wherever it is read
PATH_METAVARS = ("DIR", "PATH", "FILE")


def _path(text: str) -> str:
    """A file or folder as an absolute path (the user's ``~`` expanded); empty stays empty (none given)."""
    return str(Path(text).expanduser().absolute()) if text else text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def add_param_flags(
    parser: argparse.ArgumentParser,
    params_cls: type[CommonParams],
    title: str,
    skip: frozenset[str] = frozenset(),
    sweeps: bool = True,
    choices: Mapping[str, tuple[str, ...]] | None = None,
    more_help: Mapping[str, str] | None = None,
) -> None:
    """One flag per field of ``params_cls`` that is not a common option (nor in ``skip``).

    Every value is parsed as a list (one element unless the field sweeps); ``sweeps=False`` makes no field
    sweep, for a command that measures one configuration of its own. ``choices`` widens a field's choices where
    one command offers several benchmarks (each benchmark checks its own when its parameters are built), and
    ``more_help`` adds what a shared field means to the others.
    """
    flags = params_cls.flags()
    hints = {f.name: hint for f, hint in flags}
    own = params_cls.__dict__.get("__annotations__", {})
    shown = [f for f, _ in sorted(flags, key=lambda fh: fh[0].name not in own)]  # the benchmark's own knobs first
    shown = [f for f in shown if f.name not in BASE_FIELDS and f.name not in skip]
    owners = {f.name: _owner(params_cls, f.name, title) for f in shown}
    titles = [title, *dict.fromkeys(t for t, _ in owners.values() if t not in (title, "measurement")), "measurement"]
    groups = {t: parser.add_argument_group(t) for t in titles}  # each part's flags together, measurement last
    for f in shown:
        group_title, part = owners[f.name]
        group = groups[group_title]
        base = f.metadata.get("help", "")
        if part is not None:  # which of the parts take it, or the parts a selector chooses among: the registry's
            base = part.selector_help(base) if part.selector == f.name else part.setting_help(f.name, base)
        meta = {**f.metadata, "help": base + (more_help or {}).get(f.name, "")}
        if hints[f.name] is bool:  # a switch: on when the default is off, "--no-..." when it is on
            flag = meta.get("flag") or ("--no-" if f.default else "--") + f.name.replace("_", "-")
            help_text = meta.get("help", "").replace("%", "%%")
            group.add_argument(
                flag, dest=f.name, action="store_const", const=[not f.default], default=None, help=help_text
            )
            continue
        default = f.default if f.default not in (MISSING, "", None) else "none"
        help_text = f"{meta.get('help', '')} (default {default})".replace("%", "%%")
        allowed: tuple[str, ...] | None = (choices or {}).get(f.name) or meta.get("choices")
        parse = _element_parser(f, hints[f.name], allowed)
        metavar = meta.get("metavar") or ("|".join(allowed) if allowed else f.name.upper())
        if sweeps and meta.get("sweep", True):
            group.add_argument(
                _flag(f),
                dest=f.name,
                type=a.list_of(parse),
                default=None,
                metavar=metavar,
                help=help_text + "; a list sweeps",
            )
        else:
            group.add_argument(
                _flag(f), dest=f.name, type=_single(parse), default=None, metavar=metavar, help=help_text
            )


def _owner(params_cls: type[CommonParams], name: str, title: str) -> tuple[str, Parts | None]:
    """The ``--help`` group of the flag ``name`` and the parts it belongs to (their selector, or one's setting):
    measurement; a part's settings; the group of the class that declares the field (its ``flag_group``); else
    ``title``, the benchmark's own."""
    if name in MEASUREMENT_FIELDS:
        return "measurement", None
    declared = {f.name for f in fields(params_cls)}
    for part in params_cls.flag_parts():
        if part.selector == name:
            return title, part
        if name not in declared and part.takers(name):
            return part.title, part
    owner = next((c for c in params_cls.__mro__ if name in c.__dict__.get("__annotations__", {})), None)
    return (owner.__dict__.get("flag_group") if owner else None) or title, None


def _single(parse: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    """A value parsed as a list of one, the shape every flag's value has (a field that does not sweep)."""

    def one(text: str) -> list[Any]:
        return [parse(text)]

    return one


def add_set_flags(parser: argparse.ArgumentParser, kernel: str) -> None:
    names = [s.name for s in sets_for(kernel)]
    g = parser.add_argument_group("shape sets")
    if names:
        g.add_argument("--set", metavar="NAME", help=f"run a named shape set: {', '.join(names)}")
        g.add_argument("--limit", type=a.positive_int, metavar="N", help="with --set: only the first N shapes")
    g.add_argument(
        "--sweep",
        action="store_true",
        help="lists of the same length vary together (one point per position) instead of forming every combination",
    )


def entries_from_args(ns: argparse.Namespace, benchmark: str, params_cls: type[CommonParams]) -> list[Entry]:
    """Every (shape, option) combination the flags ask for, validated."""
    flags = params_cls.flags()
    given: dict[str, list[Any]] = {
        f.name: v for f, _ in flags if f.name not in BASE_FIELDS and (v := getattr(ns, f.name, None)) is not None
    }
    rows: list[dict[str, Any]] = [{}]
    set_name = getattr(ns, "set", None)
    if set_name:
        shape_set = load_set(benchmark, set_name)
        clash = sorted(set(given) & set(shape_set.columns))
        if clash:
            raise UsageError(f"--set {set_name} gives the shapes; drop --{clash[0].replace('_', '-')}")
        rows = shape_set.rows[: ns.limit] if ns.limit else shape_set.rows
    elif getattr(ns, "limit", None):
        raise UsageError("--limit only applies with --set NAME")
    combos = _zip(given) if ns.sweep else expand(given)
    with typed_by_person():  # every flag here was typed: one for a part not chosen is refused at any value
        return [make_entry(benchmark, {**row, **combo}) for row in rows for combo in combos]


def _zip(given: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """--sweep: lists advance together; a single value is used at every point."""
    lengths = {len(v) for v in given.values() if len(v) > 1}
    if len(lengths) > 1:
        raise UsageError("--sweep needs every list to have the same length (or a single value)")
    n = lengths.pop() if lengths else 1
    return [{k: (v[i] if len(v) > 1 else v[0]) for k, v in given.items()} for i in range(n)]
