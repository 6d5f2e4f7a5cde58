"""Parts of one's own (a model, a backend, an engine, a prompt source, a device kind, a family), found one way: a
built-in name, a name an installed package declares in the :data:`GROUP` entry points (``KIND.NAME``), or a
``package.module:Class`` where the name goes; and :func:`load_object`, the one loader of ``module:name``. A
built-in's name is never replaced; nothing is imported until asked for (docs/extending.md)."""

from __future__ import annotations

import functools
import importlib
from typing import Any, TypeVar

from accelbench.errors import UsageError

T = TypeVar("T")

#: the entry-point group installed packages declare their parts in
GROUP = "accelbench.parts"
#: the kinds of part, as an entry's name begins (``engine.echo``)
KINDS = ("model", "backend", "engine", "source", "device_kind", "family")


def installed(kind: str) -> dict[str, str]:
    """The parts of ``kind`` installed packages declare, name -> ``module:attribute``, in the order found."""
    if kind not in KINDS:
        raise ValueError(f"no kind of part {kind!r}: the kinds are {', '.join(KINDS)}")
    prefix = kind + "."
    return {name[len(prefix) :]: value for name, value in _declared() if name.startswith(prefix)}


@functools.cache
def _declared() -> tuple[tuple[str, str], ...]:
    """Every entry of :data:`GROUP`, read once a process (the installed packages do not change under a run; a
    family's records are looked up by it thousands of times in a report)."""
    from importlib.metadata import entry_points

    return tuple((ep.name, ep.value) for ep in entry_points(group=GROUP))


def with_installed(kind: str, builtin: dict[str, T]) -> dict[str, T | str]:
    """The built-in parts of ``kind`` and after them the installed ones a built-in name does not shadow."""
    extra: dict[str, T | str] = {n: v for n, v in installed(kind).items() if n not in builtin}
    return {**builtin, **extra}


def load_object(path: str, what: str) -> Any:
    """The object ``module:attribute`` names, or one line saying why it cannot be loaded."""
    module, _, name = path.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"cannot load {what} {path!r}: {exc}") from None


def load_class(path: str, base: type[T], kind: str) -> type[T]:
    """The class ``package.module:Class`` names, checked to be a ``base`` (one line where it is not)."""
    obj = load_object(path, kind)
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise UsageError(f"{path!r} is not a subclass of {base.__module__}.{base.__qualname__}")
    return obj
