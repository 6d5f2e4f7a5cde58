"""The bench/ scripts that set accelbench beside a bare loop run here as they would on a GPU machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.slow  # two real torchrun jobs: in CI's second pytest step (pytest -m slow)
def test_the_bare_fsdp2_loop_runs_under_a_torchrun_that_reads_its_own_options(tmp_path: Path, cli_env) -> None:
    """``--nproc`` is an abbreviation of torchrun's ``--nproc-per-node``: the script's own options must never reach
    torchrun's parser (on torch 2.11 it refused them as ambiguous), so the ratio is printed."""
    cmd = [sys.executable, str(BENCH / "train_llm.py"), "--nproc", "2", "--rounds", "1", "--steps", "4",
           "--warmup", "1", "--batch", "2", "--seq-len", "32"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ambiguous option" not in done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert "x2 ranks on cpu" in last and "median ratio" in last and "(goal >= 0.98)" in last


@pytest.mark.slow  # accelbench's gemm run twice beside the bare loop: in CI's second pytest step
def test_the_gemm_beside_its_bare_loop_prints_both_figures_and_the_ratio(tmp_path: Path, cli_env) -> None:
    cmd = [sys.executable, str(BENCH / "gemm_vs_bare.py"), "--size", "256", "--precision", "fp32", "--device", "cpu",
           "--rounds", "1", "--samples", "10"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    first, last = done.stdout.strip().splitlines()[-2:]
    assert "accelbench " in first and "bare median " in first and "best " in first
    assert last.startswith("gemm 256^3 fp32 on cpu: accelbench/bare-median median ") and "(goal >= 0.98)" in last
