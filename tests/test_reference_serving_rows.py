"""Published llama3.1-8b serving rows on one H100/H200: TensorRT-LLM's maximum-throughput figures at fixed
prompt/answer lengths, and MLPerf Inference v5.1's one-H100 vLLM submission. A row that fixed its lengths is like
a run only at those lengths (a 128/128 figure says nothing of a 512/128 run); MLPerf's rows, of a data set's
varying lengths, are matched as before, with the lengths said beside the ratio."""

from __future__ import annotations

import json
import re

import pytest

from accelbench.cli.main import main
from accelbench.reference.match import Match, beside, matches
from accelbench.reference.table import Reference, references, select
from accelbench.reference.tokens import fixed_lengths
from accelbench.results.record import Metric, Result

TRT_REF = re.compile(r"^NVIDIA/TensorRT-LLM@[0-9a-f]{12}:docs/source/performance/perf-overview\.md#llama-31-8b$")
#: every ISL/OSL row of the table's Llama 3.1 8B section, (H200, H100) output tokens/s as printed
TRT_TABLE = {
    (128, 128): (27911, 28312),
    (128, 2048): (26221, 22714),
    (128, 4096): (18027, 14325),
    (500, 2000): (20770, 17660),
    (1000, 1000): (17744, 15220),
    (1000, 2000): (16828, 13899),
    (2048, 128): (3538, 3450),
    (2048, 2048): (12194, 9305),
    (5000, 500): (3902, 3459),
    (20000, 2000): (1804, 1351),
}


def _trt() -> list[Reference]:
    return [r for r in references() if r.source.startswith("TensorRT-LLM")]


def record(
    input_tokens: int,
    output_tokens: int,
    value: float = 20000.0,
    *,
    scenario: str = "offline",
    jitter: float = 1.0,
    prompts_file: str | None = None,
) -> Result:
    """A record of ``accelbench infer llama3.1-8b --precision fp8 --engine vllm`` on one device: the lengths it
    asked for and the tokens it served (random prompts at ``--input-jitter 1`` serve exactly the asked lengths)."""
    metrics = {
        "tokens_per_second": Metric(value=value, unit="output tokens/s", higher_is_better=True),
        "tokens_per_second_per_device": Metric(value=value, unit="output tokens/s per device", higher_is_better=True),
    }
    requests = 3000
    served_in = input_tokens * requests if jitter == 1 else round(input_tokens * (1 + jitter) / 2) * requests
    details: dict = {
        "limits": {"ttft_p99_ms": None, "tpot_p99_ms": None},
        "requests": requests,
        "input_tokens": served_in,
        "output_tokens": output_tokens * requests,
    }
    if prompts_file:
        details["prompts"] = {"file": prompts_file, "samples": requests}
    params = {
        "model": "llama3.1-8b", "scenario": scenario, "scale": "full", "precision": "fp8", "engine": "vllm",
        "backend": "torch", "nproc": 1, "profile": "quick", "batch_size": 256, "input_tokens": input_tokens,
        "output_tokens": output_tokens, "input_jitter": jitter,
    }  # fmt: skip
    return Result(
        "infer/loadgen", params, metrics=metrics, primary_metric="tokens_per_second", valid=True, details=details,
        system={"fingerprint": "f00d", "profile": {"torch": {"version": "2.5.1+cu124"}}},
    )  # fmt: skip


def _trt_matches(r: Result) -> list[Match]:
    return [m for m in matches(r) if m.reference.source.startswith("TensorRT-LLM")]


def test_tensorrt_llm_rows_load_with_their_lengths_and_name_the_file_and_commit() -> None:
    rows = _trt()
    assert len(rows) == 2 * len(TRT_TABLE)
    got = {(r.lengths, "H200" if "H200" in r.accelerator else "H100"): r.value for r in rows}
    for lengths, (h200, h100) in TRT_TABLE.items():
        assert got[(lengths, "H200")] == h200 and got[(lengths, "H100")] == h100
    for r in rows:
        assert TRT_REF.match(r.source_ref), r.source_ref
        assert r.model == "llama3.1-8b" and r.precision == "fp8" and r.task == "inference_offline"
        assert r.metric == "total_output_throughput" and r.unit == "tokens/s"
        assert r.devices == 1 and r.per_device == r.value
        assert r.input_tokens is not None and r.output_tokens is not None
        assert r.output_tokens_per_sample == r.output_tokens  # fixed per request, not a data set's mean
        assert f"{r.input_tokens} in / {r.output_tokens} out" in r.data
        assert f"{r.value:,.0f} as published" in r.notes and "not an MLPerf LoadGen run" in r.notes
        assert not r.benchmark and r.samples_per_second is None and r.ttft_p99_ms is None
    assert {r.accelerator for r in select(accelerator="h200") if r in rows} == {"NVIDIA H200 SXM 141GB (DGX H200)"}


def test_mlperf_v51_one_h100_rows_and_every_mlperf_row_keep_no_fixed_lengths() -> None:
    h100 = [r for r in select(model="llama3.1-8b", accelerator="h100") if r.source == "MLPerf Inference v5.1 closed"]
    by_task = {r.task: r for r in h100}
    assert set(by_task) == {"inference_offline", "inference_server"}
    offline, server = by_task["inference_offline"], by_task["inference_server"]
    assert (offline.value, offline.samples_per_second) == (5777.08, 45.1334)
    assert (server.value, server.samples_per_second) == (5103.99, 39.56)
    assert (server.ttft_p99_ms, server.tpot_p99_ms) == (2000, 100) and offline.ttft_p99_ms is None
    for r in h100:
        assert r.devices == 1 and r.precision == "fp8" and r.framework.startswith("vLLM 0.10.0")
        assert "/RedHat/results/XE8640_4xH100_vLLM/llama3.1-8b/" in r.source_ref
        assert "closed/RedHat/systems/XE8640_4xH100_vLLM.json" in r.notes and "(1 GPU used)" in r.notes
    assert all(r.lengths is None for r in references() if r.source.startswith("MLPerf"))


def test_a_128_128_run_is_like_the_128_128_rows_only() -> None:
    found = _trt_matches(record(128, 128, 20000.0))
    assert len(found) == len(_trt())
    like = [m for m in found if m.like]
    assert {m.reference.lengths for m in like} == {(128, 128)}
    assert {m.reference.accelerator for m in like} == {
        "NVIDIA H200 SXM 141GB (DGX H200)",
        "NVIDIA H100 SXM 80GB (DGX H100)",
    }
    h100 = next(m for m in like if "H100" in m.reference.accelerator)
    assert h100.ratio == pytest.approx(20000.0 / 28312) and h100.ratio_per_device == pytest.approx(20000.0 / 28312)
    said = h100.comparable
    assert "trtllm-bench's maximum-throughput run" in said
    assert "synthetic random token ids, 128 in / 128 out tokens per request published" in said
    assert "128 in / 128 out tokens per request here" in said
    assert "accuracy target" not in said  # TensorRT-LLM's table holds no accuracy target
    other = next(m for m in found if m.reference.lengths == (1000, 1000) and "H200" in m.reference.accelerator)
    assert other.ratio is None
    assert other.unlike == ("token lengths differ (1000/1000 tokens published, 128/128 tokens here)",)


def test_a_512_128_run_meets_no_128_128_row_but_mlperf_rows_as_before() -> None:
    r = record(512, 128, 9000.0)
    trt = _trt_matches(r)
    assert trt and not any(m.like for m in trt)
    at_128 = [m for m in trt if m.reference.lengths == (128, 128)]
    assert len(at_128) == 2
    assert all(m.unlike == ("token lengths differ (128/128 tokens published, 512/128 tokens here)",) for m in at_128)
    # the one-H100 MLPerf Offline row (CNN/DailyMail's varying lengths) keeps its ratio, the lengths said beside it
    mlperf = [m for m in matches(r) if m.reference.source == "MLPerf Inference v5.1 closed"]
    h100 = next(m for m in mlperf if "H100" in m.reference.accelerator)
    assert h100.like and h100.ratio == pytest.approx(9000.0 / 5777.08)
    assert "CNN/DailyMail, 13,368 samples, 128 output tokens per sample published" in h100.comparable
    assert "512 in / 128 out tokens per request here" in h100.comparable


def test_varying_or_unrecorded_prompt_lengths_are_not_like_a_fixed_length_row() -> None:
    row = next(r for r in _trt() if r.lengths == (128, 128) and "H100" in r.accelerator)
    jittered = beside(record(128, 128, scenario="offline", jitter=0.8), row)
    assert jittered is not None and jittered.ratio is None
    assert jittered.unlike == (
        "token lengths differ (128/128 tokens each published; prompts drawn 0.8..1 x 128 tokens long here "
        "(--input-jitter 1 fixes them))",
    )
    from_file = beside(record(128, 128, prompts_file="/data/cnn_eval.json"), row)
    assert from_file is not None and from_file.ratio is None
    assert "prompts from cnn_eval.json here, of varying lengths" in from_file.unlike[0]
    bare = record(128, 128)
    bare.details = {}
    bare.params.pop("input_tokens")
    assert fixed_lengths(bare) == "token lengths not recorded here"
    unknown = beside(bare, row)
    assert unknown is not None and unknown.ratio is None and "not recorded" in unknown.unlike[0]


def test_a_server_run_meets_no_tensorrt_llm_row_and_the_listing_carries_the_lengths(capsys) -> None:
    assert _trt_matches(record(128, 128, scenario="server")) == []
    assert main(["reference", "--model", "llama3.1-8b", "--accelerator", "h200", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    trt = [x for x in rows if x["source"].startswith("TensorRT-LLM")]
    assert len(trt) == len(TRT_TABLE)
    assert {(x["input_tokens"], x["output_tokens"]) for x in trt} == set(TRT_TABLE)
