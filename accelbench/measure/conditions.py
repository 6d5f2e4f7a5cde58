"""The conditions a measurement ran under: CPU steal, other processes' CPU use, the GPU's clock and throttling,
beside every number, so a reader can tell a slow machine from a busy one. "Other processes" are those outside
accelbench's own process tree (:func:`mark_root` and everything it started, reaped or not); a warning names the
top ones (docs/methodology.md)."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import psutil

from accelbench.devices.kind import reader_for
from accelbench.devices.readers import DeviceReader
from accelbench.measure.energy import EnergyMeter

#: Hypervisor steal above this share of CPU time marks a result as contended.
STEAL_THRESHOLD = 0.05
#: Other processes using more than this share of all CPUs mark a result as contended.
OTHER_CPU_THRESHOLD = 0.10
#: Share of the window a power or thermal limit held the GPU's clocks down before a figure is flagged.
THROTTLE_THRESHOLD = 0.01

_BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq")
#: The top accelbench process, "PID:START" (START: its start time, seconds since the epoch), inherited by every
#: process accelbench starts: whatever runs below it is accelbench's own work.
ROOT_ENV = "ACCELBENCH_ROOT_PROCESS"
#: How many other processes the warning names (the record keeps a few more).
NAMED_IN_WARNING = 3
_RECORDED_OTHERS = 5


def _system_busy_and_steal() -> tuple[float, float, float]:
    t = psutil.cpu_times()
    busy = sum(getattr(t, f, 0.0) for f in _BUSY_FIELDS)
    steal = getattr(t, "steal", 0.0)
    total = sum(t._asdict().values()) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return busy, steal, total


def mark_root(pid: int | None = None) -> int:
    """Make ``pid`` (default: this process) the top of accelbench's process tree and return the root's pid.

    Called where accelbench starts processes (a suite worker names its runner), before the benchmark starts any,
    so that each inherits the mark. A valid mark already there is kept: an accelbench started by another one
    belongs to the outer one's tree. A ``pid`` that is neither this process nor an ancestor marks this process.
    """
    current = _marked_root()
    if current is not None:
        return current
    try:
        me = psutil.Process()
        p = me if pid is None or pid == me.pid else next((q for q in me.parents() if q.pid == pid), me)
        os.environ[ROOT_ENV] = f"{p.pid}:{p.create_time():.3f}"
    except psutil.Error:
        return os.getpid()
    root: int = p.pid
    return root


def root_pid() -> int:
    """The top accelbench process: the marked one, or this process when no valid mark is inherited."""
    marked = _marked_root()
    return os.getpid() if marked is None else marked


def _marked_root() -> int | None:
    """The marked root when it is this process or one of its ancestors and started when the mark says; a mark
    inherited from an ended process, or exported by hand, is ignored (it would make strangers "own")."""
    pid_text, _, start_text = os.environ.get(ROOT_ENV, "").partition(":")
    try:
        pid, start = int(pid_text), float(start_text)
        me = psutil.Process()
        line = [me, *me.parents()]
    except (ValueError, psutil.Error):
        return None
    for p in line:
        if p.pid == pid:
            try:
                return pid if abs(p.create_time() - start) < 1.0 else None
            except psutil.Error:
                return None
    return None


def _cpu_seconds(t: Any) -> float:
    """A process's CPU time with that of its reaped children (which ``children_*`` hold from the reaping on)."""
    seconds: float = t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    return seconds


def _own_cpu_seconds() -> float:
    """CPU seconds used so far by accelbench's process tree, reaped children included.

    The sum over the live tree at one instant of each process's own and reaped children's time: taken at a
    window's start and end, a child that is reaped mid-window moves from its own line into its parent's
    ``children_*`` and is counted once, a child started and ended inside the window is counted in full.
    """
    try:
        root = psutil.Process(root_pid())
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        tree = [psutil.Process()]
    total = 0.0
    for p in tree:
        try:
            total += _cpu_seconds(p.cpu_times())
        except psutil.Error:  # ended (its time is now its parent's) or not ours to read
            continue
    return total


@dataclass(frozen=True)
class _Seen:
    """One process in a snapshot of the machine's processes: its parent, its own CPU seconds and those of its
    reaped children (None: not readable)."""

    ppid: int
    cpu: float | None
    children: float = 0.0


def _process_table() -> dict[psutil.Process, _Seen]:
    """Every process's parent and CPU time (one pass over /proc on Linux: a few ms for a hundred processes).

    Keyed by psutil's process objects, which compare by pid and start time: a pid reused in the window is a new
    process, not the old one's continuation. Names are read only for the few that a warning names.
    """
    table: dict[psutil.Process, _Seen] = {}
    for p in psutil.process_iter(["ppid", "cpu_times"]):
        t = p.info.get("cpu_times")
        ppid = p.info.get("ppid") or 0
        if t is None:
            table[p] = _Seen(ppid, None)
        else:
            kids = getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
            table[p] = _Seen(ppid, t.user + t.system, kids)
    return table


def _name(p: psutil.Process) -> str:
    try:
        return p.name() or "?"
    except psutil.Error:
        return "?"


def _tree_of(table: dict[psutil.Process, _Seen], root: int) -> set[psutil.Process]:
    """``root`` and its descendants in ``table``."""
    kids: dict[int, list[psutil.Process]] = {}
    for p, seen in table.items():
        if p.pid != seen.ppid:
            kids.setdefault(seen.ppid, []).append(p)
    found = {p for p in table if p.pid == root}
    todo = [root]
    while todo:
        for child in kids.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child.pid)
    return found


def _window_cpu(
    before: dict[psutil.Process, _Seen], after: dict[psutil.Process, _Seen]
) -> dict[psutil.Process, tuple[float, float]]:
    """(own, reaped children's) CPU seconds of each process alive at the end, used between the two snapshots.

    A process that ended in the window was reaped by its nearest surviving ancestor, whose ``children_*`` then
    hold its whole life: the part it had used before the window is taken off that ancestor's children's share.
    Kept apart, a shell running a build reads as its children's work, and init reaping orphans as theirs.
    """
    used: dict[psutil.Process, list[float]] = {}
    for p, seen in after.items():
        was = before.get(p)
        if seen.cpu is None or (was is not None and was.cpu is None):
            continue
        used[p] = [seen.cpu - ((was.cpu or 0.0) if was else 0.0), seen.children - (was.children if was else 0.0)]
    by_pid = {p.pid: p for p in before}
    for p, was in before.items():
        if p in after or was.cpu is None:
            continue
        ppid, hops = was.ppid, 0
        while ppid in by_pid and hops < 64:
            parent = by_pid[ppid]
            if parent in after:
                if parent in used:
                    used[parent][1] -= was.cpu + was.children
                break
            ppid, hops = before[parent].ppid, hops + 1
    return {p: (max(0.0, own), max(0.0, kids)) for p, (own, kids) in used.items()}


@dataclass
class Conditions:
    """What else was happening on the machine while a measurement ran."""

    threads: int
    cpu_count: int
    wall_seconds: float = 0.0
    steal_fraction: float = 0.0
    #: busy CPU time outside accelbench's process tree, as a share of all CPUs over the window
    other_cpu_fraction: float = 0.0
    #: CPU seconds accelbench's process tree used in the window (workers, ranks and reaped children included)
    own_cpu_seconds: float = 0.0
    #: busy CPU seconds of the machine in the window that were not accelbench's (other_cpu_fraction's numerator)
    other_cpu_seconds: float = 0.0
    #: live processes in accelbench's tree at the end of the window (this one, its workers, ranks, the runner)
    own_processes: int = 0
    #: CPU seconds of the system under test's own processes on this machine (a local server a client measures):
    #: neither accelbench's nor contention
    sut_cpu_seconds: float = 0.0
    #: the other processes that used the most CPU in the window: name, pid, cpu_seconds, cpu_fraction (of all CPUs);
    #: ``exited_children: true`` for the time of a process's children that ended in the window (a build's compilers)
    other_processes: list[dict[str, Any]] = field(default_factory=list)
    gpu: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: the warnings typed, in the record's concern form ({kind, text, data}: :class:`accelbench.results.record.Concern`
    #: serialised, since measure/ stands below results/): what a consumer decides by, the words being ``warnings``
    concerns: list[dict[str, Any]] = field(default_factory=list)
    #: the window's energy per domain, measured or why not (measure/energy.py)
    energy: dict[str, Any] = field(default_factory=dict)

    @property
    def contended(self) -> bool:
        return bool(self.warnings)

    def flag(self, kind: str, text: str, *, first: bool = False, **data: Any) -> None:
        """Add a concern and its words (at the front with ``first``)."""
        at = 0 if first else len(self.warnings)
        self.warnings.insert(at, text)
        self.concerns.insert(at, {"kind": kind, "text": text, "data": data})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["contended"] = self.contended
        return d


class ConditionsMonitor:
    """Context manager that samples /proc/stat (via psutil) before and after a measurement, and meters the
    energy of the window on the CPU packages and on ``gpus`` (default: ``gpu_index``).

    GPUs are named by the index their kind monitors them by (:meth:`DeviceKind.monitored`); their clocks,
    throttling and energy come from ``reader`` (default: the reader of this machine's GPUs, NVML or amdsmi),
    so nothing here knows a vendor. The process table is read once before the window opens and once after it
    closes (a few ms each for a hundred processes), so naming the other processes costs the measurement nothing."""

    def __init__(
        self,
        threads: int,
        gpu_index: int | None = None,
        gpus: Sequence[int] | None = None,
        reader: DeviceReader | None = None,
        sut_pids: Sequence[int] = (),
    ) -> None:
        """``sut_pids``: processes (with their children) that are the system under test, such as a server on
        this machine that accelbench is the client of: their CPU is the measured work, not contention."""
        self.conditions = Conditions(threads=threads, cpu_count=os.cpu_count() or 1)
        self._sut_pids = tuple(sut_pids)
        self._gpu_index = gpu_index
        self._reader = reader
        indices = list(gpus) if gpus is not None else [] if gpu_index is None else [gpu_index]
        self._meter = EnergyMeter(indices, reader=reader)

    def __enter__(self) -> "ConditionsMonitor":
        self._root = root_pid()
        self._table0 = _process_table()  # before the energy window and the clock start: not part of the window
        self._meter.__enter__()
        self._violations0: dict[str, float] = {}
        if self._gpu_index is not None:
            self._reader = self._reader or reader_for(self._gpu_index)
            if self._reader is not None:
                self._violations0 = self._reader.throttle_counters(self._gpu_index)
        self._t0 = time.perf_counter()
        self._busy0, self._steal0, self._total0 = _system_busy_and_steal()
        self._own0 = _own_cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        c = self.conditions
        c.wall_seconds = time.perf_counter() - self._t0
        self._meter.__exit__(*exc)
        if self._meter.reading is not None:
            c.energy = self._meter.reading.to_dict()
        busy, steal, total = _system_busy_and_steal()
        own = max(0.0, _own_cpu_seconds() - self._own0)
        d_total = max(total - self._total0, 1e-9)
        c.steal_fraction = max(0.0, (steal - self._steal0) / d_total)
        capacity = max(c.wall_seconds * c.cpu_count, 1e-9)
        c.own_cpu_seconds = own
        if self._gpu_index is not None and self._reader is not None:
            self._gpu_throttling(c, self._reader, self._gpu_index)  # the counters first, closest to the window's end
        table1 = _process_table()
        window = _window_cpu(self._table0, table1)
        sut = {p for t in (self._table0, table1) for pid in self._sut_pids for p in _tree_of(t, pid)}
        c.sut_cpu_seconds = sum(sum(window.get(p, (0.0, 0.0))) for p in sut)
        c.other_cpu_seconds = max(0.0, busy - self._busy0 - own - c.sut_cpu_seconds)
        c.other_cpu_fraction = min(1.0, c.other_cpu_seconds / capacity)
        self._name_others(c, capacity, table1, window, sut)
        # contention first, the steal before the other processes: what most changes a figure is read first
        if c.other_cpu_fraction > OTHER_CPU_THRESHOLD:
            c.flag(
                "contended",
                f"contended: other processes used {c.other_cpu_fraction:.0%} of the CPUs ({_who(c.other_processes)})",
                first=True,
                share=round(c.other_cpu_fraction, 4),
            )
        if c.steal_fraction > STEAL_THRESHOLD:
            c.flag(
                "contended",
                f"contended: the hypervisor stole {c.steal_fraction:.0%} of CPU time",
                first=True,
                steal=round(c.steal_fraction, 4),
            )

    def _name_others(
        self,
        c: Conditions,
        capacity: float,
        table1: dict[psutil.Process, _Seen],
        window: dict[Any, Any],
        sut: set[psutil.Process],
    ) -> None:
        """The processes outside accelbench's tree (and the system under test's) that used the most CPU in the
        window, from two snapshots of the process table taken outside the window's figures (before its start,
        after its end)."""
        own = _tree_of(self._table0, self._root) | _tree_of(table1, self._root)  # an orphaned worker stays ours
        c.own_processes = sum(1 for p in own if p in table1)
        # a reaped child's time is its whole life, and where it was orphaned in the window (init reaps it) the
        # part before the window cannot be told apart: never more than the machine's other busy time in the window
        shares = [
            (min(seconds, c.other_cpu_seconds) if reaped else seconds, p, reaped)
            for p, both in window.items()
            if p not in own and p not in sut
            for seconds, reaped in zip(both, (False, True), strict=True)
            if seconds > 0
        ]
        shares.sort(key=lambda share: -share[0])
        c.other_processes = [
            {
                "name": _name(p),
                "pid": p.pid,
                "cpu_seconds": round(seconds, 3),
                "cpu_fraction": round(seconds / capacity, 4),
            }
            | ({"exited_children": True} if reaped else {})
            for seconds, p, reaped in shares[:_RECORDED_OTHERS]
        ]

    def _gpu_throttling(self, c: Conditions, reader: DeviceReader, index: int) -> None:
        """Throttling during the window from the reader's cumulative counters (NVML's violation time, amdsmi's
        residency); the end snapshot of the throttle reasons where they are missing."""
        c.gpu = reader.conditions(index)
        after = reader.throttle_counters(index)
        shares = reader.throttled_shares(self._violations0, after, c.wall_seconds)
        if shares:
            c.gpu["throttled_fraction"] = shares
            for limit, share in shares.items():
                if share > THROTTLE_THRESHOLD:
                    c.flag(
                        "throttled",
                        f"GPU throttled: the {limit} limit held the clocks down {share:.0%} of the time",
                        limit=limit,
                        share=round(share, 4),
                    )
            return
        reasons = c.gpu.get("throttle_reasons") or []
        if reasons:
            c.flag(
                "throttled",
                f"GPU throttled at the end of the measurement: {', '.join(reasons)}",
                reasons=list(reasons),
            )


def _who(others: list[dict[str, Any]]) -> str:
    """'stress-ng[4242] 48%, exited children of make[17] 20%': the top other processes, so the reader knows what to
    stop."""
    shown = [p for p in others[:NAMED_IN_WARNING] if p["cpu_fraction"] >= 0.01]
    named = [
        f"{'exited children of ' if p.get('exited_children') else ''}{p['name']}[{p['pid']}] {p['cpu_fraction']:.0%}"
        for p in shown
    ]
    return ", ".join(named) if named else "no running process stands out: short-lived ones or interrupts"
