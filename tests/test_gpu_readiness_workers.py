"""Shared kernel workers as they must behave on a GPU: an error that loses the device context ends its process (the
entries after it run in a fresh one), and each entry starts with its own thread count and the memory the one before
handed back. The device is a kind of this test's own, whose context is lost the way CUDA's is; bad input to train
is one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

from accelbench.devices.kind import context_lost
from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, make_entry

#: a device kind that computes on CPU tensors and loses its context as CUDA's is lost: the first entry that makes it
#: current while the trigger file exists meets an illegal memory access, and from then on every synchronisation in
#: that process fails with the same error (CUDA: "any further CUDA work will return the same error")
STICKY_KIND = """
import os

import torch

from accelbench.devices.kind import DeviceKind

_LOST: list[int] = []


def _log(what):
    with open(os.environ["STICKY_LOG"], "a") as f:
        f.write(f"{what} {os.getpid()}\\n")


class StickyKind(DeviceKind):
    name = "stickyaccel"
    torch_type = "cpu"
    vendor = "Test Vendor"
    accelerator = True
    batch_class = "cpu"

    def count(self):
        return 1

    def resolve(self, index):
        return torch.device("cpu")

    def label(self, device):
        return "Sticky Accelerator"

    def record_name(self, device=None):
        return self.name

    def make_current(self, device):
        trigger = os.environ["STICKY_TRIGGER"]
        if os.path.exists(trigger):
            os.remove(trigger)
            _LOST.append(os.getpid())

    def synchronize(self, device):
        if _LOST:
            raise torch.AcceleratorError(
                "CUDA error: an illegal memory access was encountered\\n"
                "CUDA kernel errors might be asynchronously reported at some other API call"
            )

    def release_memory(self, device):
        _log("release_memory")


KIND = StickyKind()
"""

QUICK = {"min_time": 0.05, "max_time": 0.2, "min_reps": 3, "precision": "fp32"}


def _pids(run_dir: Path) -> list[int]:
    """The worker process of each entry, in the suite's order, from the first line of its log."""
    logs = sorted((run_dir / "logs").glob("*.log"))
    return [int(log.read_text().split(" in worker process ")[1].split()[0]) for log in logs]


def test_a_lost_device_context_ends_its_worker_and_the_next_entries_run_in_a_fresh_one(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """Four GEMMs share a worker; the first meets an illegal memory access. Its record says so, and the three after it
    run (and measure) in a new process rather than each failing with the first one's error; that process hands its
    device memory back between entries."""
    (tmp_path / "sticky_kind.py").write_text(STICKY_KIND)
    trigger, log = tmp_path / "trigger", tmp_path / "kind.log"
    trigger.touch()
    env = cli_env | {
        "ACCELBENCH_DEVICE_KINDS": "sticky_kind",
        "STICKY_TRIGGER": str(trigger),
        "STICKY_LOG": str(log),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), cli_env.get("PYTHONPATH", "")]),
    }
    suite = tmp_path / "kernels.toml"
    entries = [QUICK | {"m": m, "n": 64, "k": 64} for m in (64, 72, 80, 88)]
    tables = (", ".join(f"{k} = {json.dumps(v)}" for k, v in p.items()) for p in entries)
    suite.write_text("".join(f'[[benchmark]]\nname = "kernels/gemm"\nparams = {{ {t} }}\n' for t in tables))
    out = run_cli(
        ["run", str(suite), "--device", "stickyaccel", "--threads", "1", "--json"], env, tmp_path, process=True
    )
    assert out.returncode == 1, out.stderr[-2000:]  # the run went to its end; 1: an entry failed
    results = json.loads(out.stdout)["results"]
    assert [r["params"]["m"] for r in results] == [64, 72, 80, 88]
    first, *rest = results
    assert first["status"] == "failed" and "illegal memory access" in first["error"], first.get("error")
    assert [r["status"] for r in rest] == ["ok", "ok", "ok"], [r.get("error") for r in rest]
    assert not trigger.exists()  # the first entry met the error (not the runner, nor a later worker)
    run_dir = Path(json.loads(out.stdout)["run_dir"])
    pids = _pids(run_dir)
    assert pids[0] not in pids[1:] and len(set(pids[1:])) == 1, pids  # the lost process ran nothing after it
    first_log = sorted((run_dir / "logs").glob("*.log"))[0].read_text()
    assert "device context is unusable (CUDA error: an illegal memory access" in first_log, first_log[-1000:]
    assert "the next entries run in a fresh process" in first_log
    # the second process tidied after each entry that another followed (the last one's process ends anyway)
    assert log.read_text().split().count(str(pids[1])) == 2, log.read_text()


def test_an_entry_runs_on_the_threads_it_asks_for_or_the_default_not_those_of_the_entry_before(
    tmp_path: Path, store, profile
) -> None:
    """Three GEMMs in one worker: the second asks for one thread; the third asks for none and gets the process's
    default, as the first did."""
    suite = Suite(
        "t",
        [
            make_entry("kernels/gemm", QUICK | {"m": 64, "n": 64, "k": 64}),
            make_entry("kernels/gemm", QUICK | {"m": 72, "n": 64, "k": 64, "threads": 1}),
            make_entry("kernels/gemm", QUICK | {"m": 80, "n": 64, "k": 64}),
        ],
    )
    summary = run_suite(suite, store, RunOptions(out_dir=tmp_path / "runs"), profile=profile)
    assert [r.status for r in summary.results] == ["ok", "ok", "ok"], [r.error for r in summary.results]
    pids = _pids(summary.run_dir)
    assert len(set(pids)) == 1, pids  # they shared a process: what this test is about
    default, asked, after = (r.params["threads"] for r in summary.results)
    if default == 1:
        pytest.skip("this process's default is one thread: an entry's one thread cannot be told from it")
    assert asked == 1 and after == default, (default, asked, after)


def test_an_error_a_benchmark_went_on_from_is_found_before_the_next_entry(tmp_path: Path) -> None:
    """After an entry that another follows, its device is tidied (its memory handed back) and asked to synchronise:
    an error the benchmark caught and went on from (a failed CUDA graph capture) fails there, and the worker says
    the next entries need a fresh process. The last entry of a process is left as it is."""
    import torch

    from accelbench.devices.kind import DeviceKind, register, unregister
    from accelbench.suite.worker import execute

    asked: list[str] = []

    class Lost(DeviceKind):
        name = "lostaccel"
        accelerator = True

        def resolve(self, index: int | None) -> torch.device:
            return torch.device("cpu")

        def release_memory(self, device: torch.device) -> None:
            asked.append("release_memory")

        def synchronize(self, device: torch.device) -> None:
            asked.append("synchronize")
            raise torch.AcceleratorError("CUDA error: unspecified launch failure")

    register(Lost())
    try:
        entry = make_entry("selftest/ok", {"device": "lostaccel", "iterations": 10})
        messages: list[dict] = []
        assert execute(entry, tmp_path, messages.append, tidy=True) == "CUDA error: unspecified launch failure"
        assert asked == ["release_memory", "synchronize"]
        assert [m["type"] for m in messages if m["type"] != "progress"] == ["result", "done"]
        assert messages[-1]["context_lost"] == "CUDA error: unspecified launch failure"
        (result,) = (m["record"] for m in messages if m["type"] == "result")
        assert result["status"] == "ok"  # the entry's own figure stands; the entries after it move
        asked.clear()
        assert execute(entry, tmp_path, [].append) is None and asked == []
    finally:
        unregister("lostaccel")


def test_context_lost_reads_cuda_words_through_a_chain_and_not_other_errors() -> None:
    """The errors CUDA documents as leaving the process unusable, as torch raises them or as a benchmark rewords
    them (raised from CUDA's); an out-of-memory error or a bad argument leaves the context whole."""
    import torch

    assert context_lost(torch.AcceleratorError("CUDA error: device-side assert triggered\nmore")) == (
        "CUDA error: device-side assert triggered"
    )
    try:
        try:
            raise RuntimeError("CUDA error: unspecified launch failure")
        except RuntimeError as exc:
            raise ValueError("the kernel could not run") from exc
    except ValueError as wrapped:
        assert context_lost(wrapped) == "CUDA error: unspecified launch failure"
    assert context_lost(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")) is None
    assert context_lost(RuntimeError("CUDA error: invalid argument")) is None
    assert context_lost(None) is None


@pytest.mark.parametrize("value", ["0", "-3"])
def test_train_seq_len_below_one_is_one_line_exit_2(value: str, tmp_path: Path, cli_env: dict[str, str]) -> None:
    out = run_cli(
        ["train", "llama3.1-8b", "--scale", "tiny", f"--seq-len={value}", "--db", str(tmp_path / "s.db")],
        cli_env,
        tmp_path,
    )
    assert out.returncode == 2, (out.stdout[-500:], out.stderr[-500:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--seq-len must be at least 1" in lines[0] and "Traceback" not in out.stderr, lines
    assert not (tmp_path / "s.db").exists() or "train/llm" not in out.stdout
