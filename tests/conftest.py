from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Tests share a 2-core machine: keep torch (here and in every child process) at 2 threads.
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(scope="session", autouse=True)
def _threads() -> None:
    import torch

    torch.set_num_threads(2)


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


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose default store lives in the test's own directory."""
    env = dict(os.environ)
    env["ACCELBENCH_HOME"] = str(tmp_path / "home")
    env["COLUMNS"] = "160"
    return env


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "accelbench", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
