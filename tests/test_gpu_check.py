"""The device check (bench/gpu_check.sh) and the two bench scripts it starts with, run here as a GPU-less machine
would run them: the check plans within its budget, skips with why, leaves a flat $OUT of few files; the GEMM
comparison times both sides alike and states burst and clocks; the shared-process comparison compares figures."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
CHECK = BENCH / "gpu_check.sh"
DEFAULT_STEPS = ("gemm", "shared", "bench", "tests")


def bench_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def path_without(tool: str) -> str:
    """This PATH less every folder holding ``tool`` (a machine without an NVIDIA driver)."""
    return os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / tool).exists())


def run_check(tmp_path: Path, cli_env: dict[str, str], **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    out = tmp_path / "out"
    full = cli_env | {"OUT": str(out), "WHL": str(tmp_path / "no-wheels")} | env
    t0 = time.monotonic()
    done = subprocess.run(["bash", str(CHECK)], capture_output=True, text=True, env=full, cwd=tmp_path, timeout=300)
    return done, time.monotonic() - t0


def plan(stdout: str) -> dict[str, tuple[int, int]]:
    """Each planned step's (floor, cap) as the plan prints them."""
    found = re.findall(r"^  (\w+) +floor +(\d+) s +cap +(\d+) s ", stdout, re.M)
    return {name: (int(floor), int(cap)) for name, floor, cap in found}


def step_lines(stdout: str) -> dict[str, list[str]]:
    """What each step's outcome line says ("ran: ..." or "skipped: ..."), by step."""
    lines: dict[str, list[str]] = {}
    for name, what in re.findall(r"^\[\d+ s\] (\w+): ((?:ran|skipped): .*)$", stdout, re.M):
        lines.setdefault(name, []).append(what)
    return lines


def assert_flat(out: Path) -> list[str]:
    entries = sorted(p.name for p in out.iterdir())
    assert all((out / name).is_file() and not (out / name).is_symlink() for name in entries), entries
    assert 1 <= len(entries) <= 8 and "summary.txt" in entries, entries
    return entries


@pytest.mark.parametrize("gpu", ["absent", "fake"])
def test_without_a_cuda_device_the_check_plans_its_budget_and_says_why_each_step_is_skipped(
    tmp_path: Path, cli_env: dict[str, str], gpu: str
) -> None:
    """No driver, or an nvidia-smi that answers while torch sees no GPU: the plan (floors, caps within the default
    budget) and one "skipped: no CUDA device" line a step, none run under a one-second timeout."""
    env = {"PATH": path_without("nvidia-smi")}
    if gpu == "fake":
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text("#!/bin/sh\necho 'name, memory.total [MiB]'\necho 'NVIDIA H100 80GB HBM3, 81559 MiB'\n")
        smi.chmod(0o755)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    done, _ = run_check(tmp_path, cli_env, **env)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = plan(done.stdout)
    assert tuple(steps) == DEFAULT_STEPS, done.stdout
    assert all(0 < floor <= cap for floor, cap in steps.values())
    assert sum(cap for _, cap in steps.values()) <= 540
    assert f"caps sum to {sum(cap for _, cap in steps.values())} s of the 540 s budget" in done.stdout
    why = "nvidia-smi not found" if gpu == "absent" else "torch sees no CUDA device"
    assert step_lines(done.stdout) == {name: [f"skipped: no CUDA device ({why})"] for name in DEFAULT_STEPS}
    assert "rc 124" not in done.stdout
    assert assert_flat(tmp_path / "out") == ["summary.txt"]
    assert (tmp_path / "out" / "summary.txt").read_text() in done.stdout + "\n"


def test_a_step_whose_floor_no_longer_fits_is_not_started(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """A budget below the steps' floors: each says how much it needed and how much was left, nothing is timed out,
    and the check ends within its budget."""
    done, seconds = run_check(tmp_path, cli_env, DEVICE="cpu", BUDGET="34", STEPS="shared,gemm,tests")
    assert done.returncode == 0, done.stderr[-2000:]
    floors = {name: floor for name, (floor, _) in plan(done.stdout).items()}
    assert tuple(floors) == ("gemm", "shared", "tests")  # the check's order, not the order asked
    lines = step_lines(done.stdout)
    for name in ("gemm", "shared"):
        [line] = lines[name]
        needed = re.fullmatch(r"skipped: no time left \(needs (\d+) s, (\d+) s left\)", line)
        assert needed, line
        assert int(needed[1]) == floors[name] and int(needed[2]) < int(needed[1])
    assert lines["tests"] == ["skipped: needs a CUDA device (DEVICE=cpu)"]
    assert "rc 124" not in done.stdout and "ran:" not in done.stdout
    done_at = int(re.findall(r"^\[(\d+) s\] done: 0 ran, 3 skipped", done.stdout, re.M)[0])
    assert done_at <= 34 and seconds <= 34 + 5
    assert assert_flat(tmp_path / "out") == ["summary.txt"]


def test_a_step_that_runs_states_its_rc_seconds_and_figures_in_a_flat_out(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """DEVICE=cpu runs the shared step's CPU form (bench/shared_process.py, 3 entries): its line says rc and seconds,
    its figures follow in the summary (each entry's figure both ways, the worst against the tolerance, the time it
    took), its whole output is one log beside the summary (no run folders)."""
    done, seconds = run_check(tmp_path, cli_env, DEVICE="cpu", BUDGET="150", STEPS="shared,bench")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = step_lines(done.stdout)
    ran = re.fullmatch(r"ran: rc ([01]) in \d+ s", lines["shared"][0])  # 1: a figure beyond the tolerance
    assert ran, lines
    assert lines["bench"] == ["skipped: needs a CUDA device (DEVICE=cpu)"]
    shown = done.stdout.split(f"shared: {lines['shared'][0]}\n", 1)[1].splitlines()[:4]
    assert re.fullmatch(r"    round 1: isolated [\d.]+ s, shared [\d.]+ s \([\d.]+x\)", shown[0]), shown
    assert re.fullmatch(
        r"    figures \(TFLOPS, median over 1 round\(s\), isolated -> shared\): 256: .+, 288: .+, 320: .+", shown[1]
    ), shown
    verdict = "within" if ran[1] == "0" else "beyond"
    assert re.fullmatch(
        rf"    figures: worst entry (256|288|320)\^3: .+ TFLOPS \([+-][\d.]+%\), {verdict} the 10% tolerance", shown[2]
    ), shown
    assert re.fullmatch(r"    3 gemm entries on cpu: isolated/shared median [\d.]+x; took \d+ s", shown[3]), shown
    assert seconds <= 150 + 5
    assert assert_flat(tmp_path / "out") == ["shared.log", "summary.txt"]
    assert "figures: worst entry" in (tmp_path / "out" / "summary.txt").read_text()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BUDGET": "soon"}, "BUDGET must be a positive number of seconds"),
        ({"STEPS": "gemm,warp"}, "unknown step 'warp' in STEPS"),
        ({"DEVICE": "tpu"}, "DEVICE must be cuda or cpu"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(
    tmp_path: Path, cli_env: dict[str, str], env: dict[str, str], message: str
) -> None:
    done, _ = run_check(tmp_path, cli_env, **env)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


# bench/gemm_vs_bare.py


def gemm_args(**over: Any) -> argparse.Namespace:
    args: argparse.Namespace = bench_module("gemm_vs_bare").options(
        ["--device", "cpu", "--size", "32", "--precision", "fp32"]
    )
    for key, value in over.items():
        setattr(args, key, value)
    return args


class _FakeEvent:
    """A device event whose pairs each measure 10 ms."""

    def __init__(self, enable_timing: bool = False) -> None:
        pass

    def record(self) -> None:
        pass

    def elapsed_time(self, end: _FakeEvent) -> float:
        return 10.0


def test_the_bare_sustained_window_on_an_event_device_flushes_before_each_call_for_the_whole_window() -> None:
    """Like accelbench's cold timing: the L2 zeroed before every call (warm-up and samples), as many samples as
    fill ``--seconds`` from a measured call time, and a warm-up of ``--warmup`` seconds of calls."""
    gemm = bench_module("gemm_vs_bare")
    bare = gemm.Bare.__new__(gemm.Bare)
    calls: list[int] = []
    flushes: list[int] = []

    class Flush:
        def zero_(self) -> None:
            flushes.append(len(calls))

    bare.args = gemm_args(seconds=0.5, warmup=0.1)
    bare.events = type("Events", (), {"Event": _FakeEvent})
    bare.flush = Flush()
    bare.call = lambda: calls.append(1)
    bare.sync = lambda: None
    seconds = bare.sustained()
    assert seconds == [0.01] * 50  # 0.5 s of 10 ms calls, one call a sample
    assert len(calls) == 3 + 10 + 50  # the estimate, 0.1 s of warm-up, the samples
    assert flushes == list(range(len(calls)))  # a flush before each call


def test_the_bare_sustained_window_on_a_host_clock_lasts_its_seconds() -> None:
    """On a CPU the bare side samples for ``--seconds`` after ``--warmup``, as accelbench's host timer does, not a
    fixed count of calls."""
    gemm = bench_module("gemm_vs_bare")
    bare = gemm.Bare(gemm_args(seconds=0.2, warmup=0.05))
    t0 = time.perf_counter()
    seconds = bare.sustained()
    assert time.perf_counter() - t0 >= 0.25
    assert len(seconds) >= gemm.MIN_REPS and all(s > 0 for s in seconds)
    burst = bare.burst()
    assert len(burst) == bare.args.samples


def test_each_window_states_its_clocks_and_throttling_where_nvml_reads_them() -> None:
    gemm = bench_module("gemm_vs_bare")
    gpu = {
        "sm_clock_mhz": 1755,
        "power_w": 699.6,
        "throttle_reasons": ["sw_power_cap"],
        "throttled_fraction": {"power": 0.42, "thermal": 0.0},
    }
    line = gemm.describe_clocks(gpu, "cuda")
    assert line == (
        "clocks: SM 1755 MHz at the end; power-limited 42%, thermal-limited 0%; 700 W; reasons at the end: sw_power_cap"
    )
    assert gemm.describe_clocks({}, "cuda", "NVML not installed") == "clocks: not read (NVML not installed)"
    assert gemm.describe_clocks({}, "cpu") == "clocks: not available on cpu"


def test_the_gemm_comparison_prints_sustained_and_burst_windows_with_their_clocks(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    cmd = [sys.executable, str(BENCH / "gemm_vs_bare.py"), "--size", "128", "--precision", "fp32", "--device", "cpu",
           "--rounds", "1", "--samples", "5", "--seconds", "0.05", "--warmup", "0.02"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    head, burst, sustained, last = done.stdout.strip().splitlines()
    assert "sustained: 0.02 s warm-up, then >= 0.05 s and >= 10 samples of one call" in head
    number = r"[\d.,e+-]+"
    for line, name in ((burst, "burst"), (sustained, "sustained")):
        assert re.fullmatch(
            rf"round 1 {name}: accelbench {number} TFLOPS \[clocks: not available on cpu\], bare median {number} "
            rf"\(best {number}\) \[clocks: not available on cpu\]: {number}x",
            line,
        ), line
    assert re.fullmatch(
        rf"gemm 128\^3 fp32 on cpu: accelbench/bare-median median {number}x sustained, like with like "
        rf"\(goal >= 0.98\); burst \(hot, 5 calls\) {number}x",
        last,
    ), last


# bench/shared_process.py


def test_sharing_a_process_is_judged_by_each_entrys_figure_against_a_tolerance() -> None:
    shared = bench_module("shared_process")
    isolated = {256: [1.0, 1.1], 288: [2.0, 2.0], 320: [3.0, 3.0]}
    moved = shared.compare(isolated, {256: [1.04, 1.06], 288: [1.6, 1.6], 320: [3.1, 3.0]}, 0.10)
    assert (moved.size, moved.within) == (288, False)
    assert moved.line() == (
        "figures: worst entry 288^3: isolated 2, shared 1.6 TFLOPS (-20.0%), beyond the 10% tolerance"
    )
    held = shared.compare(isolated, {256: [1.04, 1.06], 288: [2.1, 2.1], 320: [3.1, 3.0]}, 0.10)
    assert (held.size, held.within) == (288, True) and held.line().endswith("(+5.0%), within the 10% tolerance")
