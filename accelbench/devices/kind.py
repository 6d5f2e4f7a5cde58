"""The device seam: everything accelbench asks of an accelerator, answered by one small class per kind.

Families, the kit, the timer and serving never test a device's type: they ask ``kind_of(device)``. A new
accelerator is one module that subclasses :class:`DeviceKind` and calls :func:`register`; the base class answers
as a host does, so a kind overrides only what its hardware adds. Kinds match by ``torch.device.type`` and, where
two share one (a HIP build answers ``torch.cuda`` for AMD GPUs), by :meth:`DeviceKind.claims`, latest first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.devices.base import DeviceKind
from accelbench.devices.readers import DeviceReader
from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch

__all__ = [
    "DeviceKind",
    "by_name",
    "context_lost",
    "kind_of",
    "kinds",
    "lost_in",
    "reader_for",
    "register",
    "unregister",
]


#: every kind, the most recently registered first (a specialisation shadows the kind it refines)
_KINDS: list[DeviceKind] = []


def register(kind: DeviceKind) -> DeviceKind:
    """Add a kind (a test's fake one too); a kind of the same name is replaced."""
    _KINDS[:] = [k for k in _KINDS if k.name != kind.name]
    _KINDS.insert(0, kind)
    return kind


def unregister(name: str) -> None:
    _KINDS[:] = [k for k in _KINDS if k.name != name]


def kinds() -> list[DeviceKind]:
    _builtin()
    return list(_KINDS)


def lost_in(text: str) -> str | None:
    """The line of an error's ``text`` that some kind reads as its device context lost for good, or None."""
    return next((line for kind in kinds() if (line := kind.lost_context(text)) is not None), None)


def context_lost(exc: BaseException | None) -> str | None:
    """The line of ``exc`` (or of an exception it was raised from or while handling) that says a device context is
    lost, or None: a benchmark that words a device error its own way still carries the device's words in its chain."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        line = lost_in(str(exc))
        if line is not None:
            return line
        exc = exc.__cause__ or exc.__context__
    return None


def accelerators() -> list[tuple[DeviceKind, int, "torch.device"]]:
    """Every accelerator device the seam finds on this machine, kind by kind: (kind, index, device)."""
    found: list[tuple[DeviceKind, int, "torch.device"]] = []
    for k in kinds():
        if k.accelerator and k.unavailable() is None:
            found += [(k, i, k.resolve(i)) for i in range(k.count())]
    return found


def kind_of(device: "torch.device | str") -> DeviceKind:
    """The kind that answers for ``device`` (a ``torch.device``, or a type name such as ``"cuda"``)."""
    import torch

    _builtin()
    dev = torch.device(device) if isinstance(device, str) else device
    for k in _KINDS:
        if k.claims(dev):
            return k
    return _HOST


def by_name(name: str) -> DeviceKind | None:
    """The kind a user names (``--device rocm`` is spelled ``cuda`` to torch; both find the AMD kind there)."""
    _builtin()
    return next((k for k in _KINDS if k.name == name), None)


def monitored_indices(devices: Any) -> list[int]:
    """The indices the clock, throttle and energy readers know ``devices`` by, of every kind with a reader."""
    found = (kind_of(d).monitored(d) for d in devices if d is not None and hasattr(d, "type"))
    return sorted({i for i in found if i is not None})


def reader_for(device: "int | torch.device") -> DeviceReader | None:
    """The reader of ``device``'s kind, or for a bare monitored index, the reader of this machine's GPUs.

    An index (what records and the suite pass) names a device of the accelerator kind this machine's torch
    drives: one torch build drives one GPU vendor's devices, so the first available kind with a reader is it;
    with none available, the kind torch's ``cuda`` devices belong to in this build (whose reader then says
    why it cannot read).
    """
    if not isinstance(device, int):
        return kind_of(device).reader()
    for kind in kinds():
        if kind.accelerator and kind.unavailable() is None:
            found = kind.reader()
            if found is not None:
                return found
    return kind_of("cuda").reader()


_HOST = DeviceKind()
_LOADED = False
#: the kinds shipped with accelbench, by module; rocm before cuda: it claims the torch.cuda devices of a HIP build
BUILTIN = ("rocm", "cuda", "xpu", "mps", "xla", "cpu")


def _builtin() -> None:
    """Register the kinds shipped with accelbench, once, after any a test registered first (imported lazily:
    naming a device needs no torch)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib

    for name in BUILTIN:
        kind = importlib.import_module(f"accelbench.devices.{name}").KIND
        if not any(k.name == kind.name for k in _KINDS):
            _KINDS.append(kind)
    for name in _extra_modules():  # a kind of one's own: its module's KIND, ahead of the shipped ones
        register(_load(name))


#: modules (comma-separated) whose ``KIND`` is a device kind to add; inherited by every process accelbench starts
ENV = "ACCELBENCH_DEVICE_KINDS"
#: the entry-point group packages declared their device kinds in before :data:`accelbench.plugins.GROUP` (where a
#: package now declares ``device_kind.NAME``); still read (``module:KIND`` or a module with ``KIND``)
ENTRY_POINTS = "accelbench.device_kinds"


def _extra_modules() -> list[str]:
    import os
    from importlib.metadata import entry_points

    from accelbench.plugins import installed

    named = [m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip()]
    return named + [ep.value for ep in entry_points(group=ENTRY_POINTS)] + list(installed("device_kind").values())


def _load(spec: str) -> DeviceKind:
    import importlib

    module, _, attr = spec.partition(":")
    try:
        kind = getattr(importlib.import_module(module), attr or "KIND")
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load the device kind {spec!r} ({ENV} or entry point): {exc}") from None
    if not isinstance(kind, DeviceKind):
        raise UsageError(f"{spec!r} is not a DeviceKind instance (accelbench.devices.kind.DeviceKind)")
    return kind
