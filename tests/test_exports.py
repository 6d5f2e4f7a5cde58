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


def test_onnx_backends_leave_no_export_behind_and_reuse_the_runs_export(tmp_path, store, profile) -> None:
    before = _ours()
    base = {"model": "resnet18", "scale": "tiny", "scenario": "offline", "threads": 2, "duration": 0.5}
    entries = [make_entry("infer/loadgen", base | {"backend": b}) for b in ("onnxruntime", "openvino", "int8")]
    summary = run_suite(Suite("t", entries), store, RunOptions(out_dir=tmp_path), profile=profile)
    assert [r.status for r in summary.results] == ["ok"] * 3, [r.error or r.reason for r in summary.results]
    assert _ours() - before == set()  # nothing in the system's temporary folder
    assert not (summary.run_dir / ".work" / "scratch").exists() and not (summary.run_dir / ".work" / "cache").exists()
    logs = sorted((summary.run_dir / "logs").glob("*.log"))
    assert len(logs) == 3
    assert "reusing the ONNX export" not in logs[0].read_text()  # the first entry made it
    assert all("reusing the ONNX export" in log.read_text() for log in logs[1:])  # the later ones reused it


def test_a_backend_outside_a_run_removes_its_folder_with_itself() -> None:
    import gc

    from accelbench.infer.catalog import backend

    impl = backend("onnxruntime", 1.0)
    path = impl.workdir("onnx")
    assert path.is_dir() and path.name.startswith("accelbench-onnx-")
    del impl
    gc.collect()
    assert not path.exists()
