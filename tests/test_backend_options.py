"""A serving backend owns its settings: declared once in its ``Options``, surfaced as flags, checked, recorded and
read back by older records; ``infer/loadgen``'s own parameters hold none of them."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import UsageError
from accelbench.infer.backends import NoOptions, Null
from accelbench.infer.specs import InferParams
from accelbench.params import build_params, opt
from accelbench.results.compare import workload_key
from accelbench.results.record import SCHEMA_VERSION, Result

sys.path.insert(0, str(Path(__file__).parent))


@dataclass(frozen=True)
class PauseOptions(NoOptions):
    pause_ms: float = opt(0.5, "milliseconds each batch pauses", sweep=False)

    def check(self) -> None:
        if self.pause_ms < 0:
            raise UsageError(f"pause_ms must not be negative, got {self.pause_ms}")


class Pause(Null):
    """A user's backend with a setting of its own: answers each batch after ``pause_ms``."""

    name, summary = "pause", "pauses pause_ms per batch"
    Options = PauseOptions

    def load(self, served, model, device, precision, calibration, pause_ms=0.5):  # type: ignore[no-untyped-def]
        return lambda inputs: time.sleep(pause_ms / 1000)


USER = f"{__name__}:Pause"


def test_the_run_holds_no_backend_setting_and_each_backend_declares_its_own() -> None:
    own = {f.name for f in fields(InferParams)}
    assert not own & {"channels_last", "compile_mode", "ort_optimization", "service_ms"}
    flags = {f.name for f, _ in InferParams.flags()}
    assert {"channels_last", "compile_mode", "ort_optimization", "service_ms"} <= flags  # a flag of infer each
    compiled = build_params(InferParams, {"backend": "compile", "compile_mode": "max-autotune"}, "infer/loadgen")
    assert compiled.backend_options == {"channels_last": False, "compile_mode": "max-autotune"}
    assert compiled.to_dict()["compile_mode"] == "max-autotune" and "backend_options" not in compiled.to_dict()


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"backend": "onnxruntime", "channels_last": True}, "--channels-last applies to the torch, compile backends"),
        ({"backend": "compile", "compile_mode": "fastest"}, "unknown compile mode 'fastest'"),
        ({"backend": "sleep", "service_ms": 0}, "--service-ms must be positive"),
        ({"backend": USER, "pause_ms": -1}, "pause_ms must not be negative"),
        ({"backend": USER, "ort_optimization": "basic"}, "--ort-optimization applies to the onnxruntime"),
        ({"backend": "torch", "pause_ms": 1}, "has no parameter 'pause_ms'"),
    ],
)
def test_a_setting_the_backend_does_not_take_is_refused_in_one_line(values: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        build_params(InferParams, values, "infer/loadgen")


def test_a_user_backends_setting_is_given_checked_and_recorded(tmp_path: Path) -> None:
    """A suite entry gives the user's backend its own setting; the run hands it to ``load`` and records it."""
    from accelbench.suite.runner import RunOptions, run_suite
    from accelbench.suite.suites import Suite, make_entry

    entry = make_entry(
        "infer/loadgen", {"backend": USER, "pause_ms": 2.0, "batch_size": 4, "threads": 1, "device": "cpu"}
    )
    assert entry.params["pause_ms"] == 2.0 and "channels_last" not in entry.params
    from accelbench.results.store import Store

    store = Store(tmp_path / "o.db")
    summary = run_suite(Suite("t", [entry]), store=store, options=RunOptions(out_dir=tmp_path, device="cpu"))
    [r] = summary.results
    assert r.status == "ok", r.error
    assert r.params["pause_ms"] == 2.0 and r.params["backend"] == USER


def test_an_older_record_keeps_only_its_backends_settings_and_pairs_with_a_new_one() -> None:
    """Before v3 every record listed every backend's settings; read now, an ONNX Runtime record lists its own, and
    meets a record of today's run of the same workload."""
    old_params = {
        "model": "resnet50", "scenario": "offline", "backend": "onnxruntime", "precision": "fp32", "batch_size": 8,
        "channels_last": False, "compile_mode": "default", "ort_optimization": "basic", "service_ms": 1.0,
        "nproc": 1, "streams": 1, "engine": "transformers", "page_size": 16, "device": "cpu",
    }  # fmt: skip
    old = Result.from_dict(Result("infer/loadgen", old_params).to_dict() | {"schema_version": 2})
    assert old.schema_version == SCHEMA_VERSION
    assert not {"channels_last", "compile_mode", "service_ms", "engine", "page_size"} & set(old.params)
    assert old.params["ort_optimization"] == "basic"
    today = build_params(
        InferParams,
        {"backend": "onnxruntime", "ort_optimization": "basic", "precision": "fp32", "device": "cpu"},
        "infer/loadgen",
    ).to_dict()
    new = Result("infer/loadgen", today)
    from accelbench.registry import default_params

    key = [workload_key(r, keep=("device",), defaults=default_params) for r in (old, new)]
    assert key[0] == key[1]
