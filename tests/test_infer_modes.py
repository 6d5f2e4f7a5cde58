"""Accuracy mode against the FP32 reference, backends, find-peak, and LoadGen's INVALID verdicts explained."""

import numpy as np
import pytest
from infer_fixtures import checkpoint, write_colour_folder

from accelbench.errors import UsageError
from accelbench.infer.accuracy import Verdict, agreement
from accelbench.infer.served import served
from accelbench.suite.suites import make_entry

COLOUR = {"model": "infer_fixtures:ColourNet", "threads": 2, "batch_size": 4, "device": "cpu"}


@pytest.fixture
def colours(tmp_path):
    return write_colour_folder(tmp_path / "colours")


def test_accuracy_on_a_dataset_passes_and_a_perturbed_model_fails(run_isolated, colours, tmp_path):
    good = checkpoint(tmp_path / "good.pt")
    [ok] = run_isolated({**COLOUR, "mode": "accuracy", "dataset": str(colours), "checkpoint": str(good)})
    assert ok.status == "ok", ok.error
    assert ok.metrics["top1"].value == 1.0 and ok.details["samples"] == 24
    assert ok.valid and ok.details["accuracy_gates"] == {"99%": True}

    # the served model is perturbed (a user backend that shifts every answer); the FP32 reference is not
    shifted = "infer_fixtures:ShiftedClasses"
    [bad] = run_isolated(
        {**COLOUR, "mode": "accuracy", "dataset": str(colours), "checkpoint": str(good), "backend": shifted}
    )
    assert bad.status == "ok", bad.error
    assert bad.metrics["top1"].value == 0.0 and bad.metrics["reference_top1"].value == 1.0
    assert bad.valid is False and any("below 99% of the FP32 reference" in w for w in bad.warnings)


def test_a_perturbed_checkpoint_is_scored_against_its_labels(run_isolated, colours, tmp_path):
    bad = checkpoint(tmp_path / "bad.pt", permute=True)
    [r] = run_isolated({**COLOUR, "mode": "accuracy", "dataset": str(colours), "checkpoint": str(bad)})
    assert r.status == "ok", r.error
    assert r.metrics["top1"].value < 0.5 and r.metrics["reference_top1"].value == r.metrics["top1"].value


def test_without_a_dataset_the_fp32_answers_are_the_labels(run_isolated):
    """dlrm's answers are click probabilities: the served FP32 model reproduces the reference's within 1e-3."""
    [r] = run_isolated({"model": "dlrm", "scale": "tiny", "threads": 2, "batch_size": 8, "mode": "accuracy"})
    assert r.status == "ok", r.error
    assert r.metrics["fp32_agreement"].value == 1.0 and r.valid and r.details["labels"] == "fp32-reference"
    assert r.details["samples"] == 256


@pytest.mark.parametrize("backend", ["onnxruntime", "int8", "compile"])
def test_backends_serve_the_labelled_set_accurately(backend, run_isolated, colours, tmp_path):
    pytest.importorskip("onnxruntime")
    good = checkpoint(tmp_path / "good.pt")
    params = {**COLOUR, "mode": "accuracy", "dataset": str(colours), "checkpoint": str(good), "backend": backend}
    if backend == "onnxruntime":  # a graph optimisation level other than ONNX Runtime's default, recorded
        params["ort_optimization"] = "basic"
    [r] = run_isolated(params)
    assert r.status == "ok", r.error
    assert r.metrics["top1"].value == 1.0 and r.valid
    assert r.params["precision"] == ("int8" if backend == "int8" else "fp32")
    if backend != "compile":
        facts = r.details["backend"]
        assert facts["provider"] == "CPUExecutionProvider" and facts["intra_op_threads"] == 2
        level = "ORT_ENABLE_BASIC" if backend == "onnxruntime" else "ORT_ENABLE_ALL"
        assert facts["graph_optimization"] == level


@pytest.mark.slow  # several runs end to end: in CI's second pytest step (pytest -m slow)
def test_find_peak_converges_on_a_known_service_time(run_isolated, run_once):
    """8 samples per 2 ms batch: at most 4000 samples/s, and queries of at most 8 x (bound / 2 ms) samples."""
    from conftest import FIND_PEAK_SERVER

    sleep = {"backend": "sleep", "service_ms": 2.0, "batch_size": 8, "threads": 2, "mode": "find-peak"}
    [srv] = run_once(FIND_PEAK_SERVER)  # the same run test_loadgen_probe times
    assert srv.status == "ok", srv.error
    peak = srv.details["find_peak"]["peak"]
    assert 0.6 * 4000 <= peak <= 4000 * 1.02, srv.details["find_peak"]["trials"]
    assert srv.valid and srv.details["find_peak"]["trials"][-1]["confirmation"]
    values = [t["value"] for t in srv.details["find_peak"]["trials"] if not t["confirmation"]]
    valid = [t["value"] for t in srv.details["find_peak"]["trials"] if t["valid"] and not t["confirmation"]]
    invalid = [v for v in values if v not in valid]
    assert not invalid or min(invalid) / max(valid) <= 1.02 + 1e-9 or min(invalid) > peak

    [ms] = run_isolated({**sleep, "scenario": "multistream", "latency_bound_ms": 10, "duration": 0.5})
    assert ms.status == "ok", ms.error
    spq = ms.metrics["peak_samples_per_query"].value
    assert 16 <= spq <= 40 and ms.valid, ms.details["find_peak"]["trials"]
    assert ms.metrics["query_latency_p99_seconds"].value <= 0.010


@pytest.mark.slow  # a search of a real model end to end, two minutes beside the burner: CI's pytest -m slow
def test_find_peak_of_resnet50_reaches_a_valid_peak_beside_a_cpu_bound_process(run_isolated, burner):
    """Beside a process that keeps a core of two busy, the probe can time one sample at a second (two intra-op
    threads, one of them waiting on the core the other process holds) while LoadGen's runs take tens of ms: the
    search lets a light LoadGen screen decide, climbs from there and confirms a peak LoadGen calls VALID."""
    params = {"model": "resnet50", "scale": "tiny", "scenario": "server", "mode": "find-peak", "profile": "quick"}
    [r] = run_isolated(params | {"latency_bound_ms": 250})
    assert r.status == "ok", r.error
    search = r.details["find_peak"]
    assert r.valid and search["peak"] and search["trials"][-1]["confirmation"] and search["trials"][-1]["valid"]
    assert r.metrics["latency_p99_seconds"].value <= 0.250, search["trials"]


def test_find_peak_stops_after_one_light_screen_when_one_sample_misses_the_bound(run_isolated):
    """30 ms a sample against a 10 ms bound: both probes say so, and one LoadGen screen at a light load agrees."""
    params = {"backend": "sleep", "service_ms": 30.0, "threads": 2, "mode": "find-peak", "latency_bound_ms": 10}
    [r] = run_isolated({**params, "scenario": "server"})
    assert r.status == "failed" and "one sample alone took" in r.error and "raise --latency-bound-ms" in r.error
    assert "a LoadGen screen at" in r.error and "missed the bound too" in r.error
    [screen] = r.details["find_peak"]["trials"]
    assert not screen["valid"] and screen["p99_latency_seconds"] > 0.010


def test_too_short_a_run_is_explained(run_isolated):
    """LoadGen plans Offline from the expected throughput; a far too low one ends the run early."""
    params = {"backend": "sleep", "service_ms": 1.0, "batch_size": 8, "threads": 2, "expected_qps": 100}
    [r] = run_isolated(params)
    assert r.status == "ok" and r.valid is False
    [reason] = [x for x in r.details["invalid_reasons"] if x.startswith("min duration not met")]
    assert "raise --expected-qps to" in reason


def test_two_requests_in_flight_split_the_work_on_one_device(run_isolated):
    """--streams 2: two serving workers on one device, recorded as requests in flight, never as two devices."""
    [r] = run_isolated({"backend": "sleep", "service_ms": 1.0, "batch_size": 4, "threads": 2, "streams": 2})
    assert r.status == "ok" and r.params["streams"] == 2 and r.params["nproc"] == 1
    assert len(r.details["samples_per_worker"]) == 2 and min(r.details["samples_per_worker"]) > 0
    assert "throughput_per_device" not in r.metrics  # one device: no per-device figure halved by the requests


def test_served_answers_and_metrics():
    import torch

    spec = served("dlrm", "tiny")
    assert spec.quality([np.array([p]) for p in (0.9, 0.8, 0.3, 0.1)], [1, 1, 0, 0]) == 1.0
    assert agreement([np.array([1])], [[2]]) == 0.0
    bert = served("bert", "tiny")
    tokens, segments = bert.synthetic(3, torch.device("cpu"))
    assert torch.equal(tokens, bert.synthetic(3, torch.device("cpu"))[0])
    out = bert.forward(bert.build().eval(), bert.collate([(tokens, segments)] * 2))
    assert [a.shape for a in bert.answers(out)] == [(2,), (2,)]
    assert Verdict("top1", 0.995, 1.0, {"99%": True, "99.9%": False}, 10, "dataset").passed
    rnnt = served("rnnt", "tiny")
    model = rnnt.build().eval()
    with torch.no_grad():
        seqs = rnnt.forward(model, rnnt.collate([rnnt.synthetic(i, torch.device("cpu")) for i in range(3)]))
    assert len(seqs) == 3 and all(0 not in seq for seq in seqs)  # blank is never emitted
    words = [np.array([2, 3, 1, 4, 5]), np.array([6, 1, 7])]  # "ab cd", "e f"
    assert rnnt.quality(words, words) == 1.0
    assert rnnt.quality([np.array([2, 3, 1, 4, 9]), np.array([6])], words) == pytest.approx(1 - 2 / 4)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"mode": "accuracy", "backend": "null"}, "needs a backend that runs the model"),
        ({"mode": "find-peak", "scenario": "offline"}, "find-peak searches"),
        ({"model": "unet3d", "scenario": "server"}, "offline and singlestream only"),
        ({"model": "gnmt"}, "not supported yet"),
        ({"checkpoint": "/nonexistent.pt"}, "does not exist"),
        ({"dataset": "/tmp"}, "--mode accuracy and compliance runs"),
        ({"audit": "TEST01", "model": "resnet18"}, "MLCommons does not apply TEST01 to resnet18"),
        ({"audit": "TEST06"}, "MLCommons does not apply TEST06 to resnet50"),
        ({"audit": "TEST01", "mode": "accuracy"}, "a performance run in LoadGen's audit mode"),
        ({"audit": "TEST07"}, "accelbench runs TEST01, TEST04, TEST06"),
        ({"backend": "sleep", "service_ms": 0}, "must be positive"),
        ({"service_ms": 0}, "--service-ms applies to the sleep backend, not torch"),
        ({"nproc": 0}, "positive"),
    ],
)
def test_bad_serving_input(params, message):
    with pytest.raises(UsageError, match=message):
        make_entry("infer/loadgen", params)


def _environment(params: dict) -> None:
    from accelbench.registry import get

    get("infer/loadgen").make_params(params).check_environment("cpu")


def test_what_a_backend_cannot_run_is_an_environment_problem():
    """Valid words, impossible here: refused alone (exit 2), skipped inside a sweep (see test_cli)."""
    with pytest.raises(UsageError, match="runs fp32, not amp_fp16"):
        _environment({"backend": "onnxruntime", "precision": "amp_fp16"})


def test_missing_backend_package_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "onnxruntime" else real(n, *a))
    with pytest.raises(UsageError, match=r"pip install 'accelbench\[onnx\]'"):
        _environment({"backend": "onnxruntime"})


def test_a_dataset_directory_without_images_is_named(tmp_path, cli_env):
    from conftest import run_cli

    (tmp_path / "cls").mkdir()
    out = run_cli(["infer", "resnet18", "--mode", "accuracy", "--dataset", str(tmp_path)], cli_env, tmp_path)
    assert out.returncode == 2 and "no images in" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    with pytest.raises(UsageError, match="no dataset loader for bert"):
        make_entry("infer/loadgen", {"model": "bert", "mode": "accuracy", "dataset": str(tmp_path)})
    with pytest.raises(UsageError, match="no images in"):
        served("resnet18", "tiny").dataset(tmp_path)
    with pytest.raises(UsageError, match="case_"):
        served("unet3d", "tiny").dataset(tmp_path)


def test_the_official_profile_loads_mlperf_conf():
    """LoadGen reads mlperf.conf once per process: checked in a fresh interpreter."""
    import subprocess
    import sys

    code = (
        "from accelbench.infer.settings import base; from accelbench.infer.specs import InferParams; "
        "s = base(InferParams(model='resnet50', scenario='server', profile='official')); "
        "print(s.min_duration_ms, s.server_target_latency_ns, s.qsl_rng_seed != 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["600000", "15000000", "True"]


def test_dlrm_accuracy_on_criteo_lines(run_isolated, tmp_path):
    import random

    rng = random.Random(0)
    lines = []
    for _ in range(64):
        dense = [str(rng.randint(0, 50)) if rng.random() > 0.1 else "" for _ in range(13)]
        cats = [f"{rng.getrandbits(32):08x}" if rng.random() > 0.1 else "" for _ in range(26)]
        lines.append("\t".join([str(int(rng.random() < 0.3)), *dense, *cats]))
    (tmp_path / "criteo").mkdir()
    (tmp_path / "criteo" / "day_23").write_text("\n".join(lines) + "\n")
    params = {"model": "dlrm", "scale": "tiny", "threads": 2, "mode": "accuracy", "dataset": str(tmp_path / "criteo")}
    [r] = run_isolated(params)
    assert r.status == "ok", r.error
    assert r.details["samples"] == 64 and r.details["labels"] == "dataset"
    assert 0.0 <= r.metrics["auc"].value <= 1.0 and r.metrics["quality_ratio"].value == pytest.approx(1.0)
    (tmp_path / "criteo" / "day_23").write_text("1\t2\t3\n")
    [bad] = run_isolated(params)
    assert bad.status == "failed" and "Criteo has 40" in bad.error


def test_coco_map_on_hand_made_detections():
    from accelbench.infer.metrics import coco_map

    gt = [np.array([[0, 0, 10, 10, 1]], dtype=float)]
    assert coco_map([np.array([[0, 0, 10, 10, 0.9, 1]])], gt) == pytest.approx(1.0)
    # IoU 0.62 is a hit at the thresholds 0.50, 0.55 and 0.60 only: 3 of 10
    assert coco_map([np.array([[0, 0, 10, 6.2, 0.9, 1]])], gt) == pytest.approx(0.3)
    # a higher-scored false positive halves the precision at full recall
    fp_first = np.array([[50, 50, 60, 60, 0.95, 1], [0, 0, 10, 10, 0.9, 1]])
    assert coco_map([fp_first], gt) == pytest.approx(0.5)
    assert coco_map([np.zeros((0, 6))], gt) == 0.0
    assert coco_map([np.array([[0, 0, 10, 10, 0.9, 2]])], gt) == 0.0  # right box, wrong class


def test_ssd_accuracy_on_a_coco_split(run_isolated, tmp_path):
    import json

    from PIL import Image

    root = tmp_path / "coco"
    (root / "annotations").mkdir(parents=True)
    (root / "val2017").mkdir()
    images, anns = [], []
    for i in range(3):
        Image.new("RGB", (64, 48), (40 * i, 90, 200)).save(root / "val2017" / f"{i:012d}.jpg")
        images.append({"id": i + 1, "file_name": f"{i:012d}.jpg", "width": 64, "height": 48})
        anns.append({"id": i + 1, "image_id": i + 1, "bbox": [4, 4, 30, 20], "category_id": 1, "iscrowd": 0})
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps({"images": images, "annotations": anns}))
    params = {"model": "ssd", "scale": "tiny", "threads": 2, "mode": "accuracy", "dataset": str(root), "batch_size": 3}
    [r] = run_isolated(params)
    assert r.status == "ok", r.error
    assert r.details["samples"] == 3 and 0.0 <= r.metrics["map"].value <= 1.0
    assert r.metrics["map"].value == pytest.approx(r.metrics["reference_map"].value)


def test_a_peak_no_confirmation_held_valid_is_an_invalid_record(monkeypatch, tmp_path):
    """Screens that pass and confirmations LoadGen calls INVALID: no rate is reported as the peak. The record is
    the highest confirmation's, INVALID as LoadGen's own record of that run is: ok, valid false, the reasons."""
    from types import SimpleNamespace

    from accelbench.infer import peak
    from accelbench.infer.serving import Serving
    from accelbench.infer.specs import InferParams
    from accelbench.kit.context import RunContext
    from accelbench.loadgen.settings import Probe
    from accelbench.loadgen.start import Outcome

    sizes = []
    sut = SimpleNamespace(batches=10, samples=80, per_worker=[80], utilization=0.5)

    def fake_run(serving, settings, params, ctx):
        confirm = settings.min_query_count >= peak.CONFIRM_QUERIES
        sizes.append(settings.min_query_count)
        detail = {"result_perf_constraints_met": True, "result_99.00_percentile_latency_ns": 5e6}
        detail |= {"requested_server_target_qps": settings.server_target_qps}
        detail |= {
            "result_scheduled_samples_per_sec": settings.server_target_qps,
            "result_completed_samples_per_sec": 90,
        }
        if confirm:
            detail |= {"result_validity": "INVALID", "early_stopping_met": False}
        return Outcome(detail, {}, tmp_path, sut)

    monkeypatch.setattr(peak, "loadgen_run", fake_run)
    params = InferParams(backend="sleep", scenario="server", mode="find-peak", latency_bound_ms=15.0)
    serving = Serving([], lambda i: i, 1024, list, None, None, 1)
    r = peak.find_peak(params, serving, Probe(1000.0, 1e-3), params.to_dict(), RunContext(tmp_path))
    assert r.status == "ok" and r.valid is False and r.error is None
    assert r.warnings[0].startswith("INVALID: no peak: 3 confirmation runs") and "INVALID" in r.warnings[0]
    assert any(w.startswith("INVALID: early stopping criterion not met") for w in r.warnings), r.warnings
    assert r.details["invalid_reasons"] == [w.removeprefix("INVALID: ") for w in r.warnings if "INVALID" in w]
    confirmations = [t for t in r.details["find_peak"]["trials"] if t["confirmation"]]
    assert len(confirmations) == peak.CONFIRMATIONS and all(not t["valid"] for t in confirmations)
    assert r.details["find_peak"]["peak"] is None  # no rate is the peak
    # the figures are the highest (first) confirmation's, headlined as LoadGen's INVALID Server runs are: served
    assert r.details["target_qps"] == max(t["value"] for t in confirmations) == confirmations[0]["value"]
    assert r.primary_metric == "queries_per_second" and r.primary.value == 90
    assert max(sizes) == peak.CONFIRM_QUERIES and min(sizes) < 662  # screens are short, confirmations long


def test_agreement_with_a_one_class_reference_is_uninformative_not_valid(run_isolated, tmp_path):
    """A model that answers one class for every input agrees 100% with itself: that proves nothing."""
    import torch

    one_class = tmp_path / "one-class.pt"
    torch.save({"2.weight": torch.zeros(3, 3), "2.bias": torch.tensor([5.0, 0.0, 0.0])}, one_class)
    [r] = run_isolated({**COLOUR, "mode": "accuracy", "checkpoint": str(one_class)})
    assert r.status == "ok" and r.valid is None, r.warnings
    assert r.metrics["fp32_agreement"].value == 1.0 and "1 distinct answer" in r.details["uninformative"]
    assert r.warnings[0].startswith("uninformative:") and "--dataset DIR" in r.warnings[0]


def test_random_weights_answer_many_classes_once_batchnorm_is_calibrated(run_isolated):
    """resnet18 with random weights and BatchNorm's default statistics answers one class for every input;
    statistics measured on the samples make the FP32 reference a test an int8 or fp16 backend can fail."""
    [r] = run_isolated({"model": "resnet18", "scale": "tiny", "threads": 2, "batch_size": 8, "mode": "accuracy"})
    assert r.status == "ok" and r.valid is True and "uninformative" not in r.details, r.warnings
    assert "BatchNorm statistics from 64 samples" in r.details["weights"] and "bias centring" in r.details["weights"]


def test_degenerate_references_are_named():
    from accelbench.infer.accuracy import degenerate

    assert "1 distinct answer" in degenerate([np.array(7)] * 20)
    assert "commonest for 15 of 20" in degenerate([np.array(7)] * 15 + [np.array(i) for i in range(5)])
    assert degenerate([np.array(i % 5) for i in range(20)]) is None


@pytest.mark.parametrize(
    "model, backend", [("bert", "onnxruntime"), ("dlrm", "onnxruntime"), ("unet3d", "onnxruntime"), ("bert", "int8")]
)
def test_onnx_backends_serve_every_family_they_claim_at_any_batch(model, backend, run_isolated):
    """The export keeps the batch dynamic (an example batch of one would fix it at one for bert and dlrm)."""
    pytest.importorskip("onnxruntime")
    params = {"model": model, "scale": "tiny", "threads": 2, "batch_size": 8, "backend": backend, "duration": 0.5}
    [r] = run_isolated(params)  # Offline's one query is batched however short the run
    assert r.status == "ok", r.error
    assert r.details["sut_batches"] < r.details["sut_samples"]  # batches of several samples ran


@pytest.mark.parametrize("model", ["ssd", "rnnt"])
def test_a_model_torch_onnx_cannot_export_is_refused_up_front(model):
    with pytest.raises(UsageError, match=f"cannot serve {model}: torch.onnx cannot export"):
        _environment({"model": model, "scale": "tiny", "backend": "onnxruntime"})


def test_a_checkpoint_that_is_not_weights_is_one_line_before_anything_runs(tmp_path, cli_env):
    """A garbage file, or a pickled object rather than a state_dict: one line, exit 2, before a model is built,
    and never torch's advice to load with weights_only=False (which runs the file's code)."""
    import torch
    from conftest import run_cli

    (tmp_path / "bad.pt").write_bytes(bytes(range(256)) * 8)
    torch.save([torch.zeros(2)], tmp_path / "list.pt")
    (tmp_path / "folder").mkdir()
    for name, said in (
        ("bad.pt", "is not weights torch can read safely"),
        ("list.pt", "holds a list, not a state_dict"),
        ("folder", "is a folder: give a state_dict"),
    ):
        p = run_cli(["infer", "resnet18", "--scale", "tiny", "--checkpoint", name, "--dry-run"], cli_env, tmp_path)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and said in lines[0], p.stderr
        assert "weights_only" not in p.stderr and str(tmp_path / name) in lines[0]
    good = tmp_path / "good.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, good)
    from accelbench.infer.weights import read_state_dict

    assert list(read_state_dict(good)) == ["w"]  # a wrapped state_dict is unwrapped
