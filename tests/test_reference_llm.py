"""MLPerf Inference's language-model rows (llama2-70b, llama3.1-8b tokens/s) and a token record beside them: each
row names the summary file it was read from, and ``compare --reference`` gives a ratio only between like and like
(same model and scenario, full scale, a model that ran, MLPerf's TTFT/TPOT limits), with what else differs said."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.reference.match import beside, closest, matches
from accelbench.reference.table import Reference, references, select
from accelbench.results.record import Metric, Result
from accelbench.results.store import RunInfo, Store
from accelbench.serve.limits import MLPERF_LIMITS

SYSTEM = {"fingerprint": "f00d", "profile": {"torch": {"version": "2.5.1+cu124"}}}
#: a row's source: the official results repository at a commit, and the LoadGen summary in it
SUMMARY = re.compile(
    r"^mlcommons/inference_results_v(?P<round>\d\.\d)@[0-9a-f]{12}:closed/(?P<submitter>[\w-]+)/results/"
    r"(?P<system>[\w.-]+)/(?P<benchmark>[\w.-]+)/(?P<scenario>Offline|Server|Interactive)/performance/run_1/"
    r"mlperf_log_summary\.txt$"
)
#: accelbench's model names and the keys of mlperf.conf's limits (llama2-7b borrows llama2-70b's, as its preset does)
MLPERF_NAME = {"llama2-70b": "llama2-70b", "llama2-7b": "llama2-70b", "llama3.1-8b": "llama3_1-8b"}


def _rows() -> list[Reference]:
    return [r for r in references() if r.metric == "tokens_per_second"]


def token_record(
    scenario: str,
    value: float,
    *,
    model: str = "llama2-70b",
    scale: str = "full",
    precision: str = "fp8",
    engine: str = "vllm",
    limits: tuple[float, float] | None = None,
    valid: bool = True,
) -> Result:
    """A token record as ``accelbench infer MODEL --scenario SCENARIO`` writes one: output tokens/s on one device,
    the limits it was held to, the prompts' token counts."""
    if limits is None and scenario != "offline":
        limits = MLPERF_LIMITS[MLPERF_NAME[model]][scenario]
    metrics = {
        "tokens_per_second": Metric(value=value, unit="output tokens/s", higher_is_better=True),
        "tokens_per_second_per_device": Metric(value=value, unit="output tokens/s per device", higher_is_better=True),
    }
    details = {
        "limits": {"ttft_p99_ms": limits[0] if limits else None, "tpot_p99_ms": limits[1] if limits else None},
        "requests": 1000,
        "input_tokens": 1_000_000,
        "output_tokens": 1_024_000,
    }
    params = {
        "model": model, "scenario": scenario, "scale": scale, "precision": precision, "engine": engine,
        "backend": "torch", "nproc": 1, "profile": "quick", "batch_size": 8, "input_tokens": 1024,
        "output_tokens": 1024,
    }  # fmt: skip
    return Result(
        "infer/loadgen", params, metrics=metrics, primary_metric="tokens_per_second", valid=valid, details=details,
        system=json.loads(json.dumps(SYSTEM)),
    )  # fmt: skip


def test_the_rows_load_and_each_names_the_summary_it_was_read_from() -> None:
    rows = _rows()
    assert 25 <= len(rows) <= 40
    assert {r.model for r in rows} == {"llama2-70b", "llama3.1-8b"}
    assert {r.task for r in rows} == {"inference_offline", "inference_server", "inference_interactive"}
    rounds = set()
    for r in rows:
        m = SUMMARY.match(r.source_ref)
        assert m, r.source_ref
        rounds.add(m["round"])
        assert r.source == f"MLPerf Inference v{m['round']} closed"
        assert m["benchmark"] == r.benchmark and r.benchmark.replace("_", ".").startswith(r.model)
        assert r.task == f"inference_{m['scenario'].lower()}"
        assert f"closed/{m['submitter']}/systems/{m['system']}.json" in r.notes and "VALID" in r.notes
        assert r.value > 0 and r.unit == "tokens/s" and r.devices and r.devices >= 1
        assert r.per_device == pytest.approx(r.value / r.devices)
        assert r.precision and r.framework and r.published in {"2024-03-27", "2024-08-28", "2025-09-09"}
        # tokens/s over samples/s of the same summary: the answers' mean length, a few hundred tokens at most
        assert r.output_tokens_per_sample is not None and 50 < r.output_tokens_per_sample < 1024
    assert rounds == {"4.0", "4.1", "5.1"}


def test_served_rows_carry_mlperf_limits_and_offline_rows_none() -> None:
    for r in _rows():
        if r.task == "inference_offline":
            assert r.ttft_p99_ms is None and r.tpot_p99_ms is None
        else:
            scenario = r.task.removeprefix("inference_")
            assert (r.ttft_p99_ms, r.tpot_p99_ms) == MLPERF_LIMITS[MLPERF_NAME[r.model]][scenario], r.source_ref


def test_a_tiny_record_is_set_aside_with_its_reason() -> None:
    tiny = token_record("server", 1.4e6, model="llama3.1-8b", scale="tiny", precision="fp32", engine="null")
    found = matches(tiny)
    assert found and {m.reference.task for m in found} == {"inference_server"}
    assert all(m.reference.model == "llama3.1-8b" for m in found)
    for m in found:
        assert m.ratio is None and m.ratio_per_device is None and not m.like
        assert m.unlike[0] == "tiny model" and "null engine: no model ran" in m.unlike
        assert m.ratio_text.startswith("n/a: tiny model")
    # the same record at full scale with a model that ran is still another precision than every row
    full_fp32 = matches(token_record("server", 3000.0, model="llama3.1-8b", precision="fp32"))
    assert all(m.ratio is None and any(u.startswith("precision differs") for u in m.unlike) for m in full_fp32)


def test_a_full_scale_record_is_paired_per_device_with_what_differs_said() -> None:
    record = token_record("server", 3000.0)
    found = closest(matches(record))
    assert {m.reference.model for m in found} == {"llama2-70b"}
    assert {m.reference.task for m in found} == {"inference_server"}
    like = [m for m in found if m.like]
    assert like and all(m.reference.precision == "fp8" for m in like) and found[0].like
    v41 = [m for m in like if m.reference.source == "MLPerf Inference v4.1 closed"]
    h200 = next(m for m in v41 if "/NVIDIA/results/H200-SXM-141GBx8_TRT/" in m.reference.source_ref)
    assert h200.reference.value == 29228.22 and h200.reference.devices == 8
    assert h200.ratio == pytest.approx(3000.0 / 29228.22)
    assert h200.ratio_per_device == pytest.approx(3000.0 / (29228.22 / 8))
    said = h200.comparable
    assert "TensorRT 10.2.0, CUDA 12.4 vs vLLM in process (PyTorch 2.5.1)" in said
    assert "quick LoadGen profile" in said
    assert "OpenOrca, 24,576 samples, 291 output tokens per sample published" in said
    assert "random prompts, 1000 in / 1024 out tokens per request here" in said
    assert "MLPerf's llama2-70b-99 accuracy target met there" in said
    assert "8 vs 1 device(s): compare per device" in said
    static = closest(matches(replace(record, params=record.params | {"engine": "static"})))[0].comparable
    assert "vs accelbench's static engine (PyTorch 2.5.1)" in static
    served = record.params | {"engine": "endpoint", "url": "http://127.0.0.1:8000/v1"}
    assert "vs the server at 127.0.0.1:8000" in closest(matches(replace(record, params=served)))[0].comparable
    # a row whose precision its sources do not give (v4.1's preview B200) has no ratio, and says why
    b200 = next(m for m in found if m.reference.precision == "not stated")
    assert b200.ratio is None and b200.unlike == ("published precision not stated (here fp8)",)


def test_a_rate_under_other_limits_or_in_another_scenario_is_not_paired() -> None:
    looser = token_record("server", 3000.0, limits=(6000.0, 175.0))
    for m in matches(looser):
        assert m.ratio is None and "TTFT/TPOT limits differ (2000/200 ms published, 6000/175 ms here)" in m.unlike
    interactive = matches(token_record("interactive", 2000.0))
    assert interactive and {m.reference.task for m in interactive} == {"inference_interactive"}
    assert all((m.reference.ttft_p99_ms, m.reference.tpot_p99_ms) == (450, 40) for m in interactive)
    assert any(m.like for m in interactive)
    offline = matches(token_record("offline", 3500.0))
    assert offline and {m.reference.task for m in offline} == {"inference_offline"}
    # an Offline figure set beside a Server row by hand: the scenario blocks the ratio
    server_row = next(r for r in select(model="llama2-70b", task="inference_server"))
    crossed = beside(token_record("offline", 3500.0), server_row)
    assert crossed is not None and crossed.ratio is None
    assert crossed.unlike == ("scenario differs (server published, offline here)",)
    # another model of the family meets no llama2-70b row: its figure is of other work
    assert matches(token_record("server", 9000.0, model="llama2-7b")) == []


def test_an_invalid_token_run_has_no_ratio() -> None:
    m = matches(token_record("server", 3000.0, valid=False))
    assert m and all(x.ratio is None and "INVALID run" in x.unlike for x in m)


def test_compare_reference_of_a_stored_tiny_token_run(tmp_path: Path, capsys) -> None:
    db = tmp_path / "s.db"
    record = token_record("offline", 144_100.0, model="llama3.1-8b", scale="tiny", precision="fp32", engine="null")
    record.run_id = "run-tok"
    with Store(db) as store:
        store.add_run(RunInfo("run-tok", "2026-01-01T00:00:00", "fixture", {}, "f00d", {}))
        store.add_many([record])
    assert main(["compare", "run-tok", "--reference", "--json", "--db", str(db)]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found and all(m["ratio"] is None and m["unlike"][0] == "tiny model" for m in found)
    assert {m["reference"]["task"] for m in found} == {"inference_offline"}
    assert all(m["reference"]["output_tokens_per_sample"] for m in found)
    assert main(["reference", "--task", "inference_interactive", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["model"] for r in rows} == {"llama2-70b", "llama3.1-8b"}


def test_a_checkpoint_or_an_endpoint_is_the_published_model_only_where_it_shows_it() -> None:
    """A --checkpoint folder is the model it holds: of another size than the preset's model card (parameters
    counted on it), no ratio. An endpoint serves the server's model: a ratio only where its name is the preset's
    or its model card's, never "no model ran"."""
    from accelbench.reference.tokens import another_model, served_elsewhere

    def like(r: Result) -> list:
        return [m for m in closest(matches(r)) if m.like]

    real = token_record("server", 3000.0)
    assert like(real)
    small = token_record("server", 3000.0)
    small.params["checkpoint"] = "/data/ckpt"
    small.details["model"] = {"params": 121024}
    assert another_model(small) == "another model (1.21e+05 parameters; llama2-70b has 6.9e+10)"
    assert not like(small) and all("another model (1.21e+05 parameters" in " ".join(m.unlike) for m in matches(small))
    small.details["model"] = {"params": 68_976_648_192}  # the folder holds llama2-70b itself
    assert another_model(small) is None and like(small)
    served = token_record("server", 3000.0, engine="endpoint")
    for name, known in (("meta-llama/Llama-2-70b-chat-hf", True), ("llama2-70b", True), ("stub", False), ("", False)):
        served.params["served_model"] = name
        assert (served_elsewhere(served) is None) == known, name
        assert bool(like(served)) == known and not any("no model ran" in u for m in matches(served) for u in m.unlike)
    assert served_elsewhere(served) == "served model not named is not known to be llama2-70b (its name names neither)"
