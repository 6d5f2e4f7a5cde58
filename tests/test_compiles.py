"""Compilation counted apart from a measurement (XLA compiles every new graph): the logic, on a kind of our own
whose compile counter is driven by the test; the real counter is exercised on PyTorch/XLA in tests/test_xla.py."""

from __future__ import annotations

import pytest

from accelbench.devices.xla import tpu_label
from accelbench.measure.compiles import compile_meta, compile_warning
from accelbench.results.judge import concerns
from accelbench.results.record import Metric, Result
from accelbench.system.specs import find_spec


def test_a_graph_compiled_inside_the_windows_warns_and_sets_the_record_aside():
    quiet = compile_meta((3, 12.5), (0, 0.0))
    assert quiet["compiles"] == {
        "warmup_graphs": 3,
        "warmup_compile_seconds": 12.5,
        "window_graphs": 0,
        "window_compile_seconds": 0.0,
    }
    assert compile_warning(quiet) is None
    loud = compile_meta((3, 12.5), (2, 4.0))
    warning = compile_warning(loud)
    assert warning is not None and warning.startswith("recompiled: 2 graph(s)") and "4 s" in warning
    assert compile_meta(None, None) == {} and compile_warning({}) is None  # an eager device: nothing to say

    metric = Metric(value=100.0, unit="images/s", higher_is_better=True, n=5, ci95=(95.0, 105.0))
    r = Result("train/throughput", {"model": "resnet50"}, metrics={"throughput": metric}, primary_metric="throughput")
    assert concerns(r, "throughput") == []
    r.concern("recompiled", warning)
    assert concerns(r, "throughput") == [warning]


def test_the_training_loop_counts_compilation_on_a_kind_that_compiles(monkeypatch):
    """run_windows counts the warm-up's graphs apart from the windows'; a graph compiled mid-window warns."""
    import torch

    from accelbench.devices.cpu import CpuKind
    from accelbench.train import loop
    from accelbench.train.specs import TrainParams

    counter = {"graphs": 0, "seconds": 0.0, "step": 0}

    class Compiling(CpuKind):
        def compilations(self):
            return counter["graphs"], counter["seconds"]

    kind = Compiling()
    monkeypatch.setattr("accelbench.devices.kind.kind_of", lambda device: kind)

    class T:
        device = torch.device("cpu")
        pipeline = None
        stopped = None

        def step(self):
            counter["step"] += 1
            if counter["step"] in (1, 5):  # the first step compiles, and the fifth (a changed shape)
                counter["graphs"] += 1
                counter["seconds"] += 0.5
            return torch.tensor(1.0)

    params = TrainParams(model="resnet18", warmup=2, num_batches=6, display_every=3)
    m, loss = loop.run_windows(T(), params, lambda step, sec: None)
    c = m.meta["compiles"]
    assert (c["warmup_graphs"], c["window_graphs"]) == (1, 1) and loss == 1.0
    assert compile_warning(m.meta).startswith("recompiled: 1 graph(s)")


@pytest.mark.parametrize(
    ("device_kind", "label", "bf16"),
    [
        ("TPU v2", "TPU v2 TensorCore", 22.5),  # two TensorCores per chip, each a device: half the chip's peak
        ("TPU v3", "TPU v3 TensorCore", 61.5),
        ("TPU v4", "TPU v4", 275.0),
        ("TPU v5 lite", "TPU v5e", 197.0),
        ("TPU v5", "TPU v5p", 459.0),
        ("TPU v6 lite", "TPU v6e", 918.0),
    ],
)
def test_a_tpu_is_named_and_judged_against_its_generations_peak(device_kind, label, bf16):
    assert tpu_label(device_kind) == label
    spec = find_spec(label)
    assert spec is not None and spec.peaks["bf16"] == bf16 and spec.source
    assert "fp32" not in spec.peaks  # no published FP32 peak: no % of peak rather than a wrong one


def test_an_unknown_tpu_keeps_its_runtime_name_and_has_no_peak():
    assert tpu_label("TPU7x") == "TPU7x" and find_spec("TPU7x") is None
