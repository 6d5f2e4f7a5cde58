"""Runs suite entries; executed in a worker process by the runner, or inline by Python users.

The child reports through a JSON-lines file rather than stdout, so that whatever
a library prints cannot corrupt a result; each record is written (and flushed)
as soon as the benchmark yields it, so a crash later in the same entry cannot
take it away.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from accelbench import registry
from accelbench.cache import exports_dir
from accelbench.devices import resolve_device
from accelbench.devices.kind import context_lost, kind_of, lost_in
from accelbench.errors import BenchmarkFailed, BenchmarkSkipped, RecordedElsewhere, StoppedEarly, UsageError
from accelbench.kit.context import RunContext
from accelbench.measure.conditions import mark_root
from accelbench.results.record import Result, now_iso
from accelbench.suite.suites import Entry

Emit = Callable[[dict[str, Any]], None]


def _failure(entry: Entry, error: str, started: str, record: dict[str, Any] | None = None, **fields: Any) -> Result:
    params = record if record is not None else entry.params
    return Result.failed(entry.benchmark, params, error, started_at=started, **fields)


#: the run folder's shared cache (see RunContext.cache_dir), removed by the runner at the end of the run
CACHE = ".work/cache"
#: the run folder's scratch space (see RunContext.scratch_dir): one folder per entry's process, removed when the
#: entry ends, and by the runner at the end of the run (a killed worker cannot clean up after itself)
SCRATCH = ".work/scratch"

#: why the runner asked this worker to stop early (set by the signal handlers child_main installs)
_stop: dict[str, str] = {}
#: the signals the runner stops a worker with, and what each means (SIGKILL follows after a grace period)
STOP_SIGNALS = {"SIGUSR1": "interrupted (Ctrl-C)", "SIGUSR2": "stopped at the entry's timeout"}


def _stop_poll(emit: Emit) -> Callable[[], str | None]:
    """RunContext.stop: why the runner asked this worker to stop, or None. The first call tells the runner that
    this benchmark listens (it then waits for the finished windows before killing; others are killed at once)."""
    said: list[bool] = []

    def stop() -> str | None:
        if not said:
            said.append(True)
            emit({"type": "stoppable"})
        return _stop.get("why")

    return stop


def _listen_for_stop() -> None:
    import signal

    for name, why in STOP_SIGNALS.items():
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), lambda *_, why=why: _stop.setdefault("why", why))


def _describe(exc: BaseException) -> str:
    """One line for the record: the cause, never a traceback (the log keeps it)."""
    name = type(exc).__name__
    if name == "OutOfMemoryError" or isinstance(exc, MemoryError):
        return f"out of memory: {exc}".strip().rstrip(":") + "; try smaller sizes or batch"
    text = str(exc)
    if "Original Traceback" in text:
        # a DataLoader worker's exception comes back with the worker's whole traceback in its message (40 lines
        # in the results table for one unreadable JPEG): keep where it happened and the original error's line
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        where = lines[0].removeprefix("Caught ").rstrip(".")
        return f"{lines[-1]} ({where}; the traceback is in the log)"
    first, _, rest = text.partition("\n")
    return f"{name}: {first}" + (" (more in the log)" if rest.strip() else "")


def _tidy(params: Any) -> str | None:
    """Hand back what the finished entry left on its device (its tensors, the allocator's cache), so that the next
    entry in this process starts from the memory a process of its own would have, and find out whether the device
    still answers: an error a benchmark caught and went on from (a CUDA graph's capture, a probe) can have lost the
    context all the same. Why this process must not run another entry, or None."""
    import gc

    gc.collect()
    try:
        device = resolve_device(str(getattr(params, "device", "auto")))
    except Exception:  # the entry's device is not this machine's (its record says so): nothing was made on it
        return None
    kind = kind_of(device)
    try:
        kind.release_memory(device)
        kind.synchronize(device)
    except Exception as exc:
        traceback.print_exc()
        return context_lost(exc) or f"the device failed after the entry ({_describe(exc)})"
    return None


def execute(entry: Entry, log_dir: Path, emit: Emit, tidy: bool = False) -> str | None:
    """Run ``entry``'s benchmark, emitting progress and result messages; never raises.

    Messages may come from a thread beside the benchmark's (LoadGen's progress while its test holds the main
    thread): one at a time, so no two lines of the message file interleave.

    Returns why this process must run no other entry (the device context is lost: every later call would fail with
    this entry's error), or None; ``done`` carries it as ``context_lost``, so the runner starts a fresh process for
    the entries after this one. ``tidy``: another entry follows in this process; free what this one left first.
    """
    started = now_iso()
    count = 0
    caught: BaseException | None = None
    recorded: str | None = None  # the lost context in a failed record the benchmark made of the error itself
    params: Any = None
    unlocked, lock = emit, threading.Lock()

    def send(msg: dict[str, Any]) -> None:
        with lock:
            unlocked(msg)

    def emit_result(result: Result) -> None:
        nonlocal count, started, recorded
        if result.status == "failed":
            recorded = recorded or lost_in(result.error or "")
        result.started_at, result.ended_at = started, now_iso()
        started = result.ended_at
        send({"type": "result", "record": result.to_dict()})
        count += 1

    import os
    import shutil

    scratch = log_dir.parent / SCRATCH / f"{entry.key}-{os.getpid()}"
    try:
        info = registry.get(entry.benchmark)
        params = info.make_params(entry.params)
        ctx = RunContext(
            log_dir,
            progress=lambda m, left=None: send({"type": "progress", "message": m, "left": left}),
            cache_dir=log_dir.parent / CACHE,
            scratch_dir=scratch,
            export_cache=exports_dir(),
            stop=_stop_poll(send),
        )
        for result in info.load()(params, ctx):
            if result.primary_metric is None:
                result.primary_metric = info.primary_metric
            emit_result(result)
    except BenchmarkSkipped as exc:  # the one skip path of every family
        caught = exc  # a probe's error turned into a skip can have lost the context all the same
        record = exc.record if exc.record is not None else entry.params
        emit_result(Result(benchmark=entry.benchmark, params=record, status="skipped", reason=str(exc)))
    except RecordedElsewhere as exc:  # a multi-node job's other node: say where, record nothing
        send({"type": "progress", "message": str(exc)})
    except StoppedEarly as exc:  # asked to stop before anything could be kept: the runner says why
        send({"type": "progress", "message": str(exc)})
    except BenchmarkFailed as exc:  # the one failure path of every family: a measurement that could not be made
        caught = exc
        emit_result(_failure(entry, str(exc), started, exc.record, details=dict(exc.details)))
    except UsageError as exc:
        emit_result(_failure(entry, str(exc), started))
    except Exception as exc:  # a failing benchmark is recorded, never fatal to the suite
        caught = exc
        traceback.print_exc()
        emit_result(_failure(entry, _describe(exc), started))
    else:
        if count == 0:
            emit_result(_failure(entry, "the benchmark produced no result", started))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    lost = context_lost(caught) or recorded
    if lost is None and tidy:
        lost = _tidy(params)
    if lost is not None:
        why = f"this process's device context is unusable ({lost}): the next entries run in a fresh process"
        send({"type": "progress", "message": why})
    send({"type": "done"} | ({"context_lost": lost} if lost is not None else {}))
    return lost


def run_inline(
    entry: Entry, log_dir: Path = Path("."), on_progress: Callable[[str], None] | None = None
) -> list[Result]:
    """Run an entry in this process (no isolation) and return its records."""
    results: list[Result] = []

    def emit(msg: dict[str, Any]) -> None:
        if msg["type"] == "result":
            results.append(Result.from_dict(msg["record"]))
        elif msg["type"] == "progress" and on_progress:
            on_progress(msg["message"])

    execute(entry, log_dir, emit)
    return results


def child_main(jobs: list[tuple[dict[str, Any], str, str]], log_dir: str, runner_pid: int) -> None:
    """Entry point of a worker process (forked by the runner's forkserver): each job, an entry with its message
    file and its log, one after another (the runner groups only entries that share a process well, the kernels;
    any other entry is a group of one).

    It leads a session of its own, so that the runner can kill it with everything it
    started (torchrun ranks) and a Ctrl-C in the terminal reaches only the runner;
    it dies with the runner; and each entry's output goes to that entry's log file. The runner is
    marked as the top of accelbench's process tree, so that the runner, its worker server,
    this worker and its loader workers and ranks never read as "other processes".
    """
    import faulthandler
    import os

    if hasattr(os, "setsid"):
        os.setsid()
    mark_root(runner_pid)  # the runner tops accelbench's tree: it, its worker server, this worker and what it starts
    _watch_runner(runner_pid)
    _listen_for_stop()
    import torch

    threads = torch.get_num_threads()  # this process's default: an entry that names none runs on it
    for n, (entry, out, log_path) in enumerate(jobs, 1):
        sys.stdout.flush()
        sys.stderr.flush()
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        faulthandler.enable(file=sys.stderr)
        sys.stderr.write(f"[accelbench] {entry['benchmark']} in worker process {os.getpid()}\n")
        torch.set_num_threads(threads)  # what the entry before asked (--threads 1) is not this one's
        if run_job(entry, Path(out), Path(log_dir), tidy=n < len(jobs)) is not None:
            # the runner runs what is left in a fresh process; leave without the exit handlers, which would call
            # into the lost context (and can hang there)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    sys.stdout.flush()
    sys.stderr.flush()


def _watch_runner(runner_pid: int, interval: float = 0.5) -> None:
    """Kill this worker's session when the runner is gone, so no benchmark outlives a killed runner.

    (The worker's parent is the forkserver, not the runner, so the kernel's
    parent-death signal cannot be used.)
    """
    import os
    import signal
    import threading

    def watch() -> None:
        while True:
            time.sleep(interval)
            try:
                os.kill(runner_pid, 0)
            except ProcessLookupError:
                os.killpg(os.getpgid(0), signal.SIGKILL)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="accelbench-runner-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    """``python -m accelbench.suite.worker ENTRY_JSON OUT LOG_DIR``: one entry, its messages appended to OUT."""
    run_job(json.loads(argv[0]), Path(argv[1]), Path(argv[2]))
    return 0


def run_job(entry_dict: dict[str, Any], out: Path, log_dir: Path, tidy: bool = False) -> str | None:
    """One entry of a worker, its messages appended to ``out`` as JSON lines (see :func:`execute` for ``tidy`` and
    what it returns)."""
    entry = Entry(**entry_dict)
    with out.open("a", encoding="utf-8") as f:

        def emit(msg: dict[str, Any]) -> None:
            msg["time"] = time.time()
            f.write(json.dumps(msg) + "\n")
            f.flush()
            if msg.get("type") == "progress":  # the entry's log (this process's stderr) says where it is too
                stamp = time.strftime("%H:%M:%S", time.localtime(msg["time"]))
                sys.stderr.write(f"[accelbench {stamp}] {msg.get('message', '')}\n")
                sys.stderr.flush()

        return execute(entry, log_dir, emit, tidy)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
