"""An export has an owner: the run. ONNX-based backends leave nothing in the system's temporary folder, a later
entry of the same run reuses the export, and the run's working files go when it ends."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, make_entry

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")


def _ours() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("accelbench-*")}


def test_onnx_backends_leave_no_export_behind_and_a_later_run_reuses_the_export(tmp_path, store, profile) -> None:
    from accelbench import cache

    cache.clear()  # the tests' own cache (conftest): this test's first entry must make the export
    before = _ours()
    base = {"model": "resnet18", "scale": "tiny", "scenario": "offline", "threads": 2, "duration": 0.5}

    def run(*backends: str) -> list[str]:
        entries = [make_entry("infer/loadgen", base | {"backend": b}) for b in backends]
        summary = run_suite(Suite("t", entries), store, RunOptions(out_dir=tmp_path), profile=profile)
        assert [r.status for r in summary.results] == ["ok"] * len(backends), [r.error for r in summary.results]
        work = summary.run_dir / ".work"
        assert not (work / "scratch").exists() and not (work / "cache").exists()  # the run's working files went
        return [log.read_text() for log in sorted((summary.run_dir / "logs").glob("*.log"))]

    [first] = run("onnxruntime")
    assert "kept in the export cache" in first and "reusing the ONNX export" not in first
    later = run("openvino", "int8")  # another run: the export is the same weights and shapes
    assert len(later) == 2 and all("reusing the ONNX export" in log for log in later)
    assert _ours() - before == set()  # nothing left in the system's temporary folder
    assert cache.usage(cache.exports_dir()).files == 1


def test_the_cache_keeps_the_most_recently_used_within_its_cap(tmp_path) -> None:
    import os

    from accelbench import cache

    for i, age in enumerate((300, 200, 100)):  # a.onnx the oldest use
        f = tmp_path / f"{'abc'[i]}.onnx"
        f.write_bytes(b"x" * 1000)
        os.utime(f, (f.stat().st_atime, f.stat().st_mtime - age))
    cache.touch(tmp_path / "a.onnx")  # used just now: kept
    removed = cache.trim(tmp_path, cap=2000)
    assert removed == cache.Usage(1, 1000) and sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "c.onnx"]
    assert cache.clear(tmp_path) == cache.Usage(2, 2000) and not tmp_path.exists()


def test_a_backend_outside_a_run_removes_its_folder_with_itself() -> None:
    import gc

    from accelbench.infer.catalog import backend

    impl = backend("onnxruntime")
    path = impl.workdir("onnx")
    assert path.is_dir() and path.name.startswith("accelbench-onnx-")
    del impl
    gc.collect()
    assert not path.exists()


def test_cache_command_shows_and_clears(tmp_path, cli_env) -> None:
    from conftest import run_cli

    root = tmp_path / "c"
    (root / "exports").mkdir(parents=True)
    (root / "exports" / "k.onnx").write_bytes(b"x" * 2048)
    env = cli_env | {"ACCELBENCH_CACHE": str(root)}
    shown = run_cli(["cache"], env, tmp_path)
    assert shown.returncode == 0 and "1 file(s), 2.00 KiB of a 5.00 GiB cap" in shown.stdout
    cleared = run_cli(["cache", "clear"], env, tmp_path)
    assert cleared.returncode == 0 and "removed 1 file(s)" in cleared.stdout and not root.exists()
