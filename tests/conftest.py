from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

# Tests share a 2-core machine: keep torch (here and in every child process) at 2 threads.
os.environ.setdefault("OMP_NUM_THREADS", "2")
# The export cache of the tests' workers (set before any worker process starts): never the user's own, and gone
# when the session ends.
if "ACCELBENCH_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _CACHE = tempfile.mkdtemp(prefix="abtest-cache-")
    os.environ["ACCELBENCH_CACHE"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, True)


@pytest.fixture(scope="session", autouse=True)
def _threads() -> None:
    import torch

    torch.set_num_threads(2)


def _burn(stop: Any) -> None:
    while not stop.is_set():
        pass


@pytest.fixture
def burner() -> Iterator[None]:
    """A CPU-bound process beside the test for its whole length (a core of this 2-core host)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    proc = ctx.Process(target=_burn, args=(stop,), daemon=True)
    proc.start()
    try:
        yield
    finally:
        stop.set()
        proc.join(10)
        if proc.is_alive():
            proc.kill()


@pytest.fixture(scope="session")
def profile() -> dict:
    from accelbench.system.profile import collect_profile

    return collect_profile()


@pytest.fixture
def store(tmp_path: Path):
    from accelbench.results.store import Store

    s = Store(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def run_isolated(tmp_path: Path, store, profile):
    """Run ``infer/loadgen`` with ``params`` in its own fresh process, as the runner does (LoadGen keeps
    process-global state); returns the records."""
    from accelbench.suite.runner import RunOptions, run_suite
    from accelbench.suite.suites import Suite, make_entry

    def run(params: dict) -> list:
        suite = Suite("t", [make_entry("infer/loadgen", params)])
        return run_suite(suite, store, RunOptions(out_dir=tmp_path), profile=profile).results

    return run


#: find-peak on a system of known capacity, 8 samples per 2 ms batch (at most 4,000 QPS), with a 20 ms bound: one
#: run that test_infer_modes checks converging and test_loadgen_probe checks ending in time
FIND_PEAK_SERVER = {
    "backend": "sleep",
    "service_ms": 2.0,
    "batch_size": 8,
    "threads": 2,
    "device": "cpu",
    "mode": "find-peak",
    "scenario": "server",
    "latency_bound_ms": 20,
    "duration": 0.5,
}


class SharedRuns:
    """``run_isolated``'s runs, each distinct entry made once in the session: tests that check different things of
    the same end-to-end run read one record (``seconds`` says how long the run took, for a test that bounds it)."""

    def __init__(self, out: Path, profile: dict) -> None:
        from accelbench.results.store import Store

        self.out, self.profile, self.store = out, profile, Store(out / "store.db")
        self.done: dict[str, tuple[list, float]] = {}

    def _key(self, params: dict) -> tuple[str, object]:
        import json

        from accelbench.suite.suites import make_entry

        entry = make_entry("infer/loadgen", params)
        return json.dumps(entry.params, sort_keys=True), entry  # as resolved: defaults spelt out or not, alike

    def __call__(self, params: dict) -> list:
        import time

        from accelbench.suite.runner import RunOptions, run_suite
        from accelbench.suite.suites import Suite

        key, entry = self._key(params)
        if key not in self.done:
            t0 = time.monotonic()
            summary = run_suite(Suite("t", [entry]), self.store, RunOptions(out_dir=self.out), profile=self.profile)
            self.done[key] = (summary.results, time.monotonic() - t0)
        return self.done[key][0]

    def seconds(self, params: dict) -> float:
        return self.done[self._key(params)[0]][1]


@pytest.fixture(scope="session")
def run_once(tmp_path_factory, profile):
    runs = SharedRuns(tmp_path_factory.mktemp("shared-runs"), profile)
    yield runs
    runs.store.close()


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose default store lives in the test's own directory."""
    env = dict(os.environ)
    env["ACCELBENCH_HOME"] = str(tmp_path / "home")
    env["COLUMNS"] = "160"
    return env


def stored(db: Path) -> list:
    """Every record in the store at ``db`` (what a run left there), the store closed again."""
    from accelbench.results.store import Store

    with Store(db) as store:
        return store.query()


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``accelbench ARGS`` with ``env`` in ``cwd``: through the entry point in this process (a new process costs
    seconds of imports and a new worker server each time), or, with ``process=True``, as its own process.

    Benchmarks still run isolated in the runner's worker processes either way; what the in-process call
    skips is only the interpreter's start (the real process's path: test_help_and_bad_input_in_a_real_process).
    """
    if process:
        return subprocess.run(
            [sys.executable, "-m", "accelbench", *args],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    import contextlib
    import io

    from accelbench.cli.main import main

    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.argv = ["accelbench", *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
    return subprocess.CompletedProcess(["accelbench", *args], code, out.getvalue(), err.getvalue())


def popen_interruptible(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """``cmd`` as its own process that a test can Ctrl-C (``send_signal(SIGINT)``) as a terminal would.

    A test run started as a background job inherits SIGINT ignored; the child restores the default.
    """
    import signal

    return subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
