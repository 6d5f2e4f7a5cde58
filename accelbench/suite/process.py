"""The worker process of one entry, seen from the runner: its output, its start, its end and its cause.

A worker appends JSON lines (progress, records, done) to a file that the runner tails; a worker that
dies leaves a return code or a signal, and the last line of its log, from which the runner words the
``failed`` record's cause.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
from pathlib import Path
from typing import Any


class Tail:
    """Reads complete JSON lines appended to a file by the worker."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.buffer = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        out = []
        for line in lines:
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
        return out


@functools.lru_cache(maxsize=1)
def context() -> Any:
    """Worker processes are forked from a server that has already imported torch.

    Importing torch costs seconds; paying it once per suite instead of once per
    benchmark is what lets a suite of hundreds of shapes run in minutes. CUDA is
    not initialised in the server, so each child can initialise it freshly.
    """
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "accelbench.suite.worker"])
        return ctx
    return mp.get_context("spawn")


def kill_group(proc: Any) -> None:
    """SIGKILL the worker's session (it and whatever it started, e.g. torchrun ranks)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        with contextlib.suppress(Exception):
            proc.kill()
    proc.join()


def cause(returncode: int | None, timed_out: bool, timeout: float, log_path: Path) -> str:
    if timed_out:
        return f"timed out after {timeout:g} s and was killed; raise it with --timeout or 'timeout =' in the suite file"
    last = _last_line(log_path)
    detail = f" (last output: {last})" if last else ""
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode).name if -returncode in signal.Signals._value2member_map_ else str(-returncode)
        hint = {
            "SIGKILL": "killed by SIGKILL, most likely by the kernel's OOM killer: out of memory",
            "SIGSEGV": "crashed with a segmentation fault (SIGSEGV)",
            "SIGABRT": "aborted (SIGABRT)",
            "SIGBUS": "crashed with a bus error (SIGBUS)",
        }.get(sig, f"killed by signal {sig}")
        return f"the benchmark process {hint}{detail}"
    return f"the benchmark process exited with status {returncode} before finishing{detail}"


def _last_line(path: Path) -> str:
    try:
        data = path.read_bytes()[-4000:].decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in data.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def warm() -> None:
    """Start the worker server now, so that it imports torch while this process collects the machine's profile
    (which imports torch too): on a few cores the two imports overlap instead of following each other."""
    ctx = context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
