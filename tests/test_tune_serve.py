"""accelbench tune for a language model (infer/llm): its's engine settings searched for the most tokens/s within a TPOT
limit, with trials faked where the logic is ours and one real trial through the CLI."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from accelbench.errors import UsageError
from accelbench.params import build_params
from accelbench.results.record import Metric, Result
from accelbench.suite.suites import Entry
from accelbench.tune.outcome import ranking, summary
from accelbench.tune.search import Tuner
from accelbench.tune.specs import TuneParams

MODEL = "llama3.1-8b"


def serve_params(**values: Any) -> TuneParams:
    base = {"model": MODEL, "scale": "tiny", "compile": False, "budget": "10m",
            "precisions": "fp32,bf16", "engines": "transformers,static", "emulated": True}  # fmt: skip
    return build_params(TuneParams, base | values, "tune")


class FakeServing:
    """Serves nothing: each Offline trial answers tokens/s and a p99 TPOT from a table keyed by (engine, precision,
    requests in flight, batch-token budget); a run over its ``tpot_ms`` is INVALID as accelbench makes it."""

    def __init__(self, table: dict[tuple, tuple[float, float]], inaccurate: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.table, self.inaccurate, self.now = table, inaccurate, 0.0
        self.entries: list[Entry] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, entry: Entry) -> list[Result]:
        self.entries.append(entry)
        self.now += 5.0
        p = entry.params
        if p["mode"] == "accuracy":
            ok = p["precision"] not in self.inaccurate
            m = {"decided_token_agreement": Metric(value=1.0 if ok else 0.8, unit="share", higher_is_better=True)}
            return [Result(entry.benchmark, p, metrics=m, primary_metric="decided_token_agreement", valid=ok)]
        key = (p["engine"], p["precision"], p["batch_size"], p.get("max_batch_tokens", 0))  # static has no budget
        tps, tpot = self.table.get(key, (100.0, 5.0))
        metrics = {
            "tokens_per_second": Metric(value=tps, unit="output tokens/s", higher_is_better=True),
            "tpot_p99_ms": Metric(value=tpot, unit="ms", higher_is_better=False),
        }
        valid = tpot <= p["tpot_ms"]
        return [Result(entry.benchmark, p, metrics=metrics, primary_metric="tokens_per_second", valid=valid)]


def test_the_most_tokens_within_the_tpot_limit_wins_through_the_gate() -> None:
    table = {
        ("transformers", "fp32", 8, 0): (100.0, 20.0),  # the default
        ("static", "fp32", 8, 0): (300.0, 30.0),
        ("static", "fp32", 32, 0): (900.0, 90.0),  # most tokens/s, but each user waits 90 ms a token
        ("static", "fp32", 16, 0): (500.0, 45.0),  # the most within 50 ms
        ("transformers", "bf16", 8, 0): (400.0, 20.0),  # fast but its gate fails
    }
    fake = FakeServing(table, inaccurate={"bf16"})
    params = serve_params(tpot_ms=50.0, repeats=3)
    search = Tuner(params, fake, clock=fake.clock).run()
    record = summary(search)
    # every trial is an Offline run at its concurrency held to the limit; gates are accuracy runs
    assert all(e.params["scenario"] == "offline" and e.params["tpot_ms"] == 50.0 for e in fake.entries)
    gates = [e for e in fake.entries if e.params["mode"] == "accuracy"]
    assert gates and all(e.params["engine"] in ("transformers", "static") for e in gates)
    assert not any(e.params["batch_size"] == 32 for e in gates)  # over the limit: never gated nor confirmed
    rows = {r.candidate.label(): r for r in ranking(search)}
    assert rows["static fp32 16 in flight"].status == "winner"
    assert rows["static fp32 32 in flight"].valid is False and rows["static fp32 32 in flight"].status == "screened"
    assert rows["transformers bf16 8 in flight"].status == "gate failed"
    assert record.details["outcome"] == "winner" and record.details["winner"]["batch_size"] == 16
    words = shlex.split(record.details["reproduce"])
    assert words[:3] == ["accelbench", "infer", MODEL]
    flags = dict(zip(words, words[1:], strict=False))
    assert {"--engine": "static", "--batch-size": "16", "--tpot-ms": "50.0"}.items() <= flags.items()
    assert record.metrics["speedup_over_default"].value == pytest.approx(5.0)
    assert "every engine is gated, FP32 too" in record.details["gate"]
    assert record.details["accuracy"].startswith("accuracy not verified")


def test_the_default_is_confirmed_as_the_baseline_though_it_is_no_finalist() -> None:
    """An ungated default is no contender, yet the speed-up needs it confirmed beside the winner every round."""
    table = {("transformers", "fp32", 8, 0): (100.0, 5.0), ("static", "fp32", 8, 0): (300.0, 5.0)}
    fake = FakeServing(table)
    params = serve_params(precisions="fp32", finalists=1, repeats=3, batch_sizes="8")
    search = Tuner(params, fake, clock=fake.clock).run()
    default = [
        e for e in fake.entries
        if e.params["engine"] == "transformers" and e.params["mode"] != "accuracy" and not e.params["max_batch_tokens"]
    ]  # fmt: skip
    assert len(default) == 1 + 3  # screened, then confirmed in each of the --repeats rounds
    assert not any(e.params["engine"] == "transformers" and e.params["mode"] == "accuracy" for e in fake.entries)
    record = summary(search)
    assert record.details["winner"]["engine"] == "static"
    assert record.metrics["speedup_over_default"].value == pytest.approx(3.0)


def test_continuous_batching_is_also_tried_with_other_batch_token_budgets() -> None:
    from accelbench.tune.space import runtime_stage, shape_stage

    params = serve_params(batch_sizes="16")
    first = runtime_stage(params)
    assert first.candidates[0].label() == "transformers fp32 8 in flight"  # the default first
    shapes = [c.label() for c in shape_stage(params, first.candidates[:1], set())]
    assert shapes == [
        "transformers fp32 16 in flight", "transformers fp32 8 in flight 128 tokens a step",
        "transformers fp32 8 in flight 1024 tokens a step",
    ]  # fmt: skip


def test_the_tpot_limit_defaults_to_the_preset_s_mlperf_server_limit() -> None:
    from accelbench.tune.serve import ServeTask

    task, given = serve_params().tuned(), serve_params(tpot_ms=25.0).tuned()
    assert isinstance(task, ServeTask) and isinstance(given, ServeTask)
    assert task.tpot_limit() == (100.0, "mlperf.conf llama3_1-8b Server")
    assert given.tpot_limit() == (25.0, "--tpot-ms")
    assert serve_params().trial_params().tpot_ms == 100.0


@pytest.mark.parametrize(
    "values, words",
    [
        ({"model": "resnet50"}, "--engines applies to the infer/llm benchmark, not infer/loadgen"),
        ({"engines": "endpoint"}, "only local ones"),
        ({"engines": "tgi"}, "unknown engine 'tgi'"),
        ({"backends": "onnxruntime"}, "--backends applies to the infer/loadgen benchmark, not infer/llm"),
        ({"scenario": "server"}, "--scenario applies to the infer/loadgen benchmark, not infer/llm"),
        ({"precisions": "int8"}, "unknown precision 'int8'"),
        ({"prompts": "qa.jsonl"}, "--prompts needs --checkpoint DIR"),
        ({"task": "infer", "model": "resnet18", "engines": "", "precisions": "", "tpot_ms": 20.0}, "--tpot-ms applies"),
    ],
)
def test_bad_serving_searches_are_refused_before_any_trial(values: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(")", r"\)")):
        serve_params(**values)


def test_a_real_serving_trial_through_the_cli(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """One candidate (the static engine at 8 in flight) screened for real: an Offline record held to the TPOT
    limit; with nothing to compare it against the search says "no search" and claims nothing."""
    args = ["tune", MODEL, "--scale", "tiny", "--engines", "static", "--precisions", "fp32",
            "--no-compile", "--batch-sizes", "8", "--tpot-ms", "500", "--budget", "60s", "--json"]  # fmt: skip
    out = run_cli(args, cli_env, tmp_path, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads(out.stdout)["summary"]
    assert record["status"] == "skipped" and record["reason"].startswith("no search: ")
    (trial,) = record["details"]["trials"]
    assert trial["phase"] == "screen" and trial["status"] == "ok" and trial["valid"] is True
    assert trial["metric"] == "tokens_per_second" and trial["figure"] > 0
    assert trial["settings"] == {"engine": "static", "precision": "fp32", "batch_size": 8}  # its own settings only
