"""LoadGen scenarios on CPU: the real mlcommons-loadgen driving accelbench's batching SUT."""

from pathlib import Path

import pytest

from accelbench.errors import UsageError
from accelbench.loadgen.logs import drop_empty_trace, invalid_reasons, read_detail
from accelbench.suite.suites import make_entry

NULL = {"backend": "null", "threads": 2, "batch_size": 8, "device": "cpu"}


@pytest.mark.parametrize("scenario", ["offline", "server", "singlestream", "multistream"])
def test_each_scenario_is_valid_with_the_null_backend(scenario, run_once):
    # Server's default for a null backend is 20k QPS, the harness's ceiling on a noisy 2-core machine (see
    # bench/loadgen_overhead.py); validity is checked with a margin
    target = {"target_qps": 5000} if scenario == "server" else {}
    [r] = run_once({"scenario": scenario, **NULL, **target})
    assert r.status == "ok", r.error
    assert r.valid is True, r.details.get("invalid_reasons")
    assert r.metrics[r.primary_metric].value > 0
    assert {"latency_p50_seconds", "latency_p99_seconds"} <= set(r.metrics)
    log_dir = Path(r.details["loadgen_log_dir"])
    assert (log_dir / "mlperf_log_detail.txt").is_file() and (log_dir / "mlperf_log_summary.txt").is_file()


def test_null_backend_is_not_the_bottleneck(run_once):
    [off] = run_once({"scenario": "offline", **NULL})
    # bench/loadgen_overhead.py measures the ceiling (VALID at 40k QPS on an idle host); a test on a busy
    # 2-core host only checks that the harness is far from a real model's rate
    [srv] = run_once({"scenario": "server", "target_qps": 5000, **NULL})
    assert off.metrics["throughput"].value > 2_000
    assert srv.valid, srv.details.get("invalid_reasons")
    assert srv.metrics["queries_per_second"].value > 4_000


@pytest.mark.parametrize("scenario", ["offline", "singlestream"])
def test_a_small_model_serves_validly(scenario, run_isolated):
    params = {"model": "resnet18", "scale": "tiny", "scenario": scenario, "threads": 2, "batch_size": 4}
    [r] = run_isolated(params)
    assert r.status == "ok" and r.valid, (r.error, r.details.get("invalid_reasons"))
    assert r.details["sut_samples"] > 0


def test_a_violated_latency_bound_is_explained(run_isolated):
    params = {"model": "resnet18", "scale": "tiny", "scenario": "server", "threads": 2, "batch_size": 4}
    [r] = run_isolated({**params, "latency_bound_ms": 0.01, "target_qps": 100})  # 662 queries: 6.6 s, not 13
    assert r.status == "ok" and r.valid is False
    assert any("latency bound of 0.01 ms violated" in w for w in r.details["invalid_reasons"])
    assert any(w.startswith("INVALID:") for w in r.warnings)


def test_invalid_reasons_in_plain_words(tmp_path):
    detail = tmp_path / "mlperf_log_detail.txt"
    detail.write_text(
        ':::MLLOG {"key": "result_validity", "value": "INVALID", "metadata": {}}\n'
        ':::MLLOG {"key": "result_min_duration_met", "value": false, "metadata": {}}\n'
        ':::MLLOG {"key": "result_min_queries_met", "value": true, "metadata": {}}\n'
        "not a log line\n"
    )
    d = read_detail(detail)
    assert d["result_validity"] == "INVALID"
    [reason] = invalid_reasons(d, "offline")
    assert reason.startswith("min duration not met") and "raise --expected-qps" in reason


@pytest.mark.parametrize(
    "params, message",
    [
        ({"scenario": "batch"}, "unknown scenario"),
        ({"backend": "tensorrtx"}, "unknown backend"),
        ({"profile": "fast"}, "unknown profile"),
        ({"latency_bound_ms": -1}, "must not be negative"),
        ({"duration": -5}, "^--duration must not be negative, got -5$"),
        ({"samples_per_query": 0}, "positive"),
        ({"model": "resnet5"}, "unknown model"),
        ({"backend": "onnxruntime", "channels_last": True}, "--channels-last applies to the torch, compile backends"),
        ({"ort_optimization": "basic"}, "--ort-optimization applies to the onnxruntime, int8, tensorrt backends"),
    ],
)
def test_bad_inference_input(params, message):
    with pytest.raises(UsageError, match=message):
        make_entry("infer/loadgen", params)


@pytest.mark.parametrize("trace", [False, True])
def test_loadgen_trace_only_on_request(trace, run_once):
    """LoadGen's trace grows to hundreds of MB on a fast run; run folders are copied between machines."""
    # without: the default's run, checked above; with: a run of 0.2 s (still a 61 MB trace here), not the default
    # 2 s, whose trace LoadGen took 15 s to write
    short = {"duration": 0.2} if trace else {}
    [r] = run_once({"scenario": "offline", **NULL, "loadgen_trace": trace, **short})
    path = Path(r.details["loadgen_log_dir"]) / "mlperf_log_trace.json"
    # without tracing LoadGen still creates the file, empty: it is removed rather than left to look like a failure
    assert path.exists() is trace
    assert not trace or path.stat().st_size > 10_000


def test_only_an_empty_trace_is_dropped(tmp_path):
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir(), full.mkdir()
    (empty / "mlperf_log_trace.json").write_bytes(b"")
    (full / "mlperf_log_trace.json").write_text('{"traceEvents": []}')
    assert drop_empty_trace(empty) is True and not (empty / "mlperf_log_trace.json").exists()
    assert drop_empty_trace(full) is False and (full / "mlperf_log_trace.json").exists()
    assert drop_empty_trace(tmp_path) is False  # no trace at all


def test_a_multistream_bound_is_accelbench_s_own_check_not_loadgen_s_verdict(run_isolated):
    """LoadGen >= 2.0 has no MultiStream bound: a user's bound is recorded and warned about, labelled as ours."""
    params = {"backend": "sleep", "service_ms": 1.0, "threads": 2, "batch_size": 8, "device": "cpu"}
    [r] = run_isolated({**params, "scenario": "multistream", "samples_per_query": 8, "latency_bound_ms": 0.1})
    assert r.status == "ok" and r.valid is True, r.details.get("invalid_reasons")  # LoadGen's verdict
    assert r.details["accelbench_check"] == {"multistream_latency_bound_ms": 0.1, "met": False}
    assert any("accelbench's check, not LoadGen's verdict" in w for w in r.warnings)
    [plain] = run_isolated({**params, "scenario": "multistream", "samples_per_query": 8})
    assert plain.valid is True and "accelbench_check" not in plain.details


def test_serving_settings_keep_the_arithmetic_they_name() -> None:
    """amp_bf16 stores once the casts autocast would repeat per batch (same answers, bit for bit); bf16 and
    channels_last convert the model and its inputs."""
    import torch

    from accelbench.infer.backends import TorchEager
    from accelbench.infer.served import served

    spec = served("resnet18", "tiny")
    torch.manual_seed(0)
    model = spec.build().eval()
    batch = spec.collate([spec.synthetic(i, torch.device("cpu")) for i in range(2)])
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = spec.forward(model, batch)
    import copy

    amp = TorchEager().load(spec, copy.deepcopy(model), torch.device("cpu"), "amp_bf16", [])
    assert torch.equal(amp(batch), expected)

    replica = copy.deepcopy(model)
    bf16 = TorchEager().load(spec, replica, torch.device("cpu"), "bf16", [], channels_last=True)
    out = bf16(batch)
    assert out.dtype == torch.bfloat16
    conv = next(m for m in replica.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.dtype == torch.bfloat16 and conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert spec.answers(out)[0].shape == (1,)


def test_openvino_serves_the_export_at_the_precision_asked(run_isolated) -> None:
    """OpenVINO never picks its own arithmetic: the hint is --precision's; requests in flight = --streams."""
    import openvino as ov
    import torch

    from accelbench.infer.openvino import OpenVino
    from accelbench.infer.served import served

    spec = served("resnet18", "tiny")
    torch.manual_seed(0)
    model = spec.build().eval()
    batch = spec.collate([spec.synthetic(i, torch.device("cpu")) for i in range(4)])
    impl = OpenVino()
    predict = impl.load(spec, model, torch.device("cpu"), "fp32", [batch])
    assert str(impl._compiled.get_property("INFERENCE_PRECISION_HINT")) == "<Type: 'float32'>"  # never bf16 silently
    with torch.inference_mode():
        expected = model(*batch)
    assert torch.allclose(predict(batch), expected, atol=1e-3, rtol=1e-3)
    if "BF16" not in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        assert "no bf16 arithmetic here" in (impl.unsupported("bf16") or "")

    params = {"model": "resnet18", "scale": "tiny", "backend": "openvino", "scenario": "offline", "streams": 2}
    [r] = run_isolated(params)
    assert r.status == "ok" and r.valid is True, r.error or r.reason
    assert len(r.details["samples_per_worker"]) == 2 and "throughput_per_device" not in r.metrics
    assert r.metrics["throughput"].value > 0


def test_an_offline_query_is_whole_batches_however_slow_the_system(run_isolated):
    # 40 samples/s over 0.3 s: LoadGen alone would plan 19 samples, the last batch of three
    sleep = {"backend": "sleep", "service_ms": 200.0, "batch_size": 8, "threads": 2, "duration": 0.3}
    [r] = run_isolated({"scenario": "offline", **sleep})
    assert r.status == "ok", r.error
    detail = read_detail(Path(r.details["loadgen_log_dir"]) / "mlperf_log_detail.txt")
    assert detail["generated_samples_per_query"] == r.details["sut_samples"] >= 16
    assert r.details["sut_samples"] == 8 * r.details["sut_batches"]


@pytest.mark.parametrize("seconds, timed", [(5.0, (1, 1)), (0.001, (5, 7))])  # PROBE_BATCHES, PROBE_SINGLES
def test_the_probe_times_a_slow_configuration_once(seconds, timed, monkeypatch):
    from types import SimpleNamespace

    from accelbench.infer import settings as imgset
    from accelbench.infer.serving import Serving
    from accelbench.infer.specs import InferParams
    from accelbench.infer.sut import Worker

    now = [0.0]
    calls = {8: 0, 1: 0}

    def predict(batch: list) -> None:  # a batch of 8 costs ``seconds``, one sample a fifth of that
        calls[len(batch)] += 1
        now[0] += seconds / (1 if len(batch) == 8 else 5)

    monkeypatch.setattr(imgset, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    serving = Serving([Worker(predict)], lambda i: i, 64, list, None, None, 1)
    p = imgset.probe(serving, InferParams(batch_size=8))
    assert (calls[8] - 2, calls[1] - 2) == timed  # after two warm-up calls of each shape
    assert p.rate == pytest.approx(8 / seconds) and p.single == pytest.approx(seconds / 5)


def test_the_progress_line_knows_how_long_loadgen_will_run() -> None:
    from accelbench.infer import settings as imgset
    from accelbench.infer.specs import InferParams
    from accelbench.loadgen import settings as lgset

    slow = lgset.Probe(rate=0.5, single=2.0)
    offline = imgset.performance_settings(InferParams(scenario="offline", batch_size=8), slow)
    assert lgset.planned_seconds(offline, "offline", slow.rate) == pytest.approx(8 / 0.5)  # one whole batch
    single = imgset.performance_settings(InferParams(scenario="singlestream"), slow)
    assert lgset.planned_seconds(single, "singlestream", slow.rate) == pytest.approx(64 * 2.0)
    server = imgset.performance_settings(InferParams(scenario="server", target_qps=1000.0), slow)
    assert lgset.planned_seconds(server, "server", slow.rate) == pytest.approx(2.0)  # 662 queries in under 2 s
