"""The typed part of a record's ``details`` (accelbench/results/details.py) and its JSON Schema, on records of real
runs: every fixture in tests/data/records/ was made by running the tool on a CPU (tests/data/records/make.py
says how; nothing in them is written by hand), validates against result.schema.json and round-trips through the
store; the layers that read every benchmark's records (the judge, scaling, history, the report, reference
matching) run on them as loaded.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import types
import typing
from array import array
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers import writer_misfits
from rich.console import Console

from accelbench.cli.render_trends import scaling_table
from accelbench.families import family_of
from accelbench.families import unlike as family_rules
from accelbench.families.builtin import SERVE
from accelbench.reference import tokens as ref_tokens
from accelbench.reference.match import matches
from accelbench.registry import describe_params
from accelbench.report.build import build
from accelbench.report.common import ReportInput
from accelbench.report.model import Bullets, Chart, Section, Table
from accelbench.report.tokens import is_token_run
from accelbench.report.tokens_charts import series_name
from accelbench.report.tokens_names import limits
from accelbench.results import details as det
from accelbench.results.exchange import import_path
from accelbench.results.history import histories
from accelbench.results.judge import concerns, unlike
from accelbench.results.record import Result, schema_errors
from accelbench.results.scaling import scaling_rows
from accelbench.results.store import Store
from accelbench.serve import requests as rq
from accelbench.serve.limits import Limits
from accelbench.serve.rows import RequestRow
from accelbench.serve.sweep import curve
from accelbench.workloads.decoder import PRESETS

RECORDS = Path(__file__).parent / "data" / "records"
SCHEMA = Path(__file__).parents[1] / "accelbench" / "results" / "result.schema.json"


def _make() -> types.ModuleType:
    """tests/data/records/make.py, the script that made the fixtures (a file beside them, not a module)."""
    spec = importlib.util.spec_from_file_location("make_records", RECORDS / "make.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: the command of every fixture make.py writes (a missing fixture fails here, not by a test finding no record)
COMMANDS: dict[str, str] = _make().COMMANDS
FIXTURES = tuple(COMMANDS)
#: typed keys that no fixture holds, each written by code no fixture runs: (sub-record, key) -> the writer
WRITTEN_ONLY = {
    ("engine", "served_model"): "the endpoint engine: a served model's name (a server to run against)",
    ("engine", "url"): "the endpoint engine: the server's address",
    ("find_peak", "peak_requests_per_second"): "a language model's find-peak (minutes of screens on a CPU)",
    ("derived",): "how cost and energy figures were computed: a run given a price or metered power (none recorded)",
    ("queries",): "a SingleStream or MultiStream run's queries, its energy per query's divisor (no fixture is one)",
    ("find_peak", "limits"): "a language model's find-peak: the limits its screens were held to",
    ("find_peak", "method"): "a language model's find-peak: how its screens were judged",
    ("driver", "stopped"): "a closed loop whose requests failed in a row (tests/test_closed_loop.py runs one)",
    ("engine", "compile_held"): "the static engine compiling (--engine-compile: a compile is 18 s here)",
    ("engine", "compile_fallback"): "the static engine compiling, past Dynamo's recompile limit",
    ("engine", "device"): "the endpoint engine: the server's device, as it said",
    ("engine", "ignore_eos_sent"): "the endpoint engine: whether the server was asked to ignore the end of sequence",
    ("engine", "prefix_caching"): "the vllm engine (its own environment: .ci/vllm)",
    ("engine", "eos_token_id"): "an engine running the model here, for MLPerf's TEST06 (recorded after the fixtures)",
    ("engine", "weights"): "the vllm engine: the folder it loaded",
    ("engine", "prefix_sharing"): "the continuous-batching engine (no fixture serves with it)",
    ("log",): "the runner's record of a benchmark whose worker died or ran out of time",
    ("not_judged",): "a served endpoint whose client was late (tests/test_client_clock.py starves one)",
    ("peak", "below_measured"): "a kernel measured above its peak (the peak is wrong for what ran)",
}


@cache
def _doc(name: str) -> dict[str, Any]:
    return dict(json.loads((RECORDS / f"{name}.json").read_text(encoding="utf-8")))


def raw(name: str) -> list[dict[str, Any]]:
    """The fixture's records as stored (a fresh copy each time)."""
    return copy.deepcopy(list(_doc(name)["records"]))


def records(name: str) -> list[Result]:
    return [Result.from_dict(d) for d in raw(name)]


def one(name: str) -> Result:
    [r] = records(name)
    return r


def every() -> list[Result]:
    return [r for name in FIXTURES for r in records(name)]


def _unlike(b: Result, c: Result) -> list[str]:
    """The one judge's reasons two records do not measure one thing, the families' own rules included (serving
    limits, loads and lengths are the inference family's), as compare asks it."""
    return unlike(b, c, family_rules)


# -- the fixtures: real, valid, whole ----------------------------------------------------------------------------


def test_every_fixture_is_a_real_run_that_validates_against_the_schema() -> None:
    assert sorted(p.stem for p in RECORDS.glob("*.json")) == sorted(FIXTURES)
    for name in FIXTURES:
        doc = _doc(name)
        assert doc["command"] == "accelbench " + COMMANDS[name].format(scratch="SCRATCH") and doc["records"], name
        for d in raw(name):
            assert schema_errors(d) == [], (name, schema_errors(d))
            assert d["tags"]["fixture"] == name  # made by make.py's command, as its tag says
            assert d["system"]["fingerprint"] and d["accelbench_version"]


def test_each_fixture_round_trips_through_the_record_and_the_store(tmp_path: Path) -> None:
    for name in FIXTURES:
        for d in raw(name):
            assert Result.from_dict(copy.deepcopy(d)).to_dict() == d, name
    with Store(tmp_path / "store.db") as store:
        added = 0
        for name in FIXTURES:
            new, present, _ = import_path(store, RECORDS / f"{name}.json")  # the store's reader, validating each
            assert present == 0
            added += new
            for d in raw(name):
                back = store.get(d["id"]).to_dict()
                assert back == d and back["details"] == d["details"], name  # every key kept, the untyped ones too
        assert added == store.count() == sum(len(raw(n)) for n in FIXTURES)


# -- the schema and the TypedDicts agree --------------------------------------------------------------------------


def _json_type(hint: Any) -> set[str]:
    """The JSON Schema types a Python annotation allows."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return set().union(*(_json_type(a) for a in typing.get_args(hint)))
    simple = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}
    if hint in simple:
        return {simple[hint]}
    if typing.get_origin(hint) is list:
        return {"array"}
    if typing.get_origin(hint) is dict or typing.is_typeddict(hint) or hint is Any:
        return {"object"}
    raise AssertionError(f"no JSON type for {hint!r}")


def _schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA.read_text(encoding="utf-8")))


def _agree(td: Any, node: dict[str, Any], where: str, schema: dict[str, Any]) -> int:
    """Assert a TypedDict and its schema node name the same keys with the same types, nested sub-records too;
    returns the keys checked."""
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    hints = typing.get_type_hints(td)
    props = node["properties"]
    assert set(hints) == set(props), (where, set(hints) ^ set(props))
    assert td.__required_keys__ == set(node.get("required", ())) == set(), where  # optional: any may be absent
    assert node.get("additionalProperties", True) is not False, where  # a benchmark's own keys are kept
    checked = 0
    for key, hint in hints.items():
        prop = props[key]
        if typing.is_typeddict(hint):
            checked += _agree(hint, prop, f"{where}.{key}", schema)
            continue
        said = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        assert _json_type(hint) == set(said), (f"{where}.{key}", hint, said)
        inner = typing.get_args(hint)
        if typing.get_origin(hint) is list and typing.is_typeddict(inner[0]):  # a list of sub-records: each's keys
            checked += _agree(inner[0], prop["items"], f"{where}.{key}[]", schema)
        elif typing.get_origin(hint) is list:
            assert _json_type(inner[0]) == {prop["items"]["type"]}, (f"{where}.{key}[]", hint)
        if typing.get_origin(hint) is dict:
            assert _json_type(inner[1]) == {prop["additionalProperties"]["type"]}, (f"{where}.{key}{{}}", hint)
        checked += 1
    return checked


def test_the_schema_and_the_typeddicts_name_the_same_keys_with_the_same_types() -> None:
    schema = _schema()
    node = schema["properties"]["details"]
    assert node["type"] == "object" and node["additionalProperties"] is True
    assert _agree(det.Details, node, "details", schema) > 80
    # a list of sub-records (a sweep's points, a conversation's turns) is checked key by key, not as any object
    assert schema["$defs"]["sweep"]["properties"]["points"]["items"] == {"$ref": "#/$defs/sweep_point"}
    assert node["properties"]["turns"]["items"] == {"$ref": "#/$defs/turn_row"}


def test_the_runs_limits_are_the_records_under_one_set_of_names() -> None:
    """serve.limits.Limits (what a run is held to) writes details.limits and reads it back: its fields are the
    TypedDict's keys are the schema's, and every fixture's limits read back write the same JSON."""
    schema = _schema()["$defs"]["limits"]["properties"]
    fields = [f.name for f in dataclasses.fields(Limits)]
    assert fields == list(typing.get_type_hints(det.Limits)) and set(fields) == set(schema)
    run, kept_as = typing.get_type_hints(Limits), typing.get_type_hints(det.Limits)
    assert all(_json_type(run[f]) == _json_type(kept_as[f]) for f in fields)  # each field's type is the key's
    kept = 0
    for r in every():
        stored = r.details.get("limits")
        if stored is None:
            continue
        held = Limits.of(r)
        assert held is not None and held == Limits.from_details(stored)
        assert held.record() == stored, r.tags  # the JSON a run writes is the JSON it would write again
        kept += 1
    assert kept >= 9
    server = Limits.of(one("llm_server"))
    assert server == Limits(2000, 100, "mlperf.conf llama3_1-8b Server") and server.judged  # older: judged
    loose = Limits(2000.0, 100.0, "mlperf.conf llama3_1-8b Server: goodput only", judged=False)
    assert loose.record()["judged"] is False and Limits.from_details(loose.record()) == loose
    d = raw("llm_server")[0]
    d["details"]["limits"] = loose.record()
    assert schema_errors(d) == []
    offline = Limits.of(one("llm_offline"))
    assert offline is not None and (offline.ttft_p99_ms, offline.tpot_p99_ms) == (None, None)
    assert Limits.of(one("gemm")) is None  # not a serving record
    assert Limits.from_details({"ttft_p99_ms": "2 s", "source": "x"}).ttft_p99_ms is None  # a record built in memory


def test_the_sweep_writes_the_curve_its_records_keep() -> None:
    """serve.sweep.curve, typed (Sweep, SweepPoint), writes from a sweep's records the points and front they
    keep: the stored JSON is what the typed writer makes."""
    first, last = records("llm_sweep")
    kept = last.details["sweep"]
    again = curve([first, last], kept["planned_points"], kept["id"])
    assert len(again["points"]) == len(kept["points"]) == 2 and again["pareto"] == kept["pareto"]
    for written, stored in zip(again["points"], kept["points"], strict=True):  # an older sweep's: fewer keys
        assert {k: written[k] for k in stored} == stored
    assert {k: v for k, v in again.items() if k not in ("points", "method")} == {
        k: v for k, v in kept.items() if k not in ("points", "method")
    }


def test_a_typed_key_of_another_shape_is_refused_and_a_benchmarks_own_key_kept() -> None:
    d = raw("llm_server")[0]
    d["details"]["my_benchmarks_own"] = {"anything": [1, "two"]}
    assert schema_errors(d) == []
    wrong = {
        "limits": "2000/100 ms",
        "requests": "662",
        "engine": ["static"],
        "model": {"params": "8B"},
        "target_qps": "fast",
    }
    for key, value in wrong.items():
        bad = copy.deepcopy(d)
        bad["details"][key] = value
        assert any(e.startswith(f"details/{key}") for e in schema_errors(bad)), key
    bad = copy.deepcopy(d)
    bad["details"]["limits"]["ttft_p99_ms"] = "2 s"
    assert schema_errors(bad) == ["details/limits/ttft_p99_ms: '2 s' is not of type 'number', 'null'"]


def test_every_typed_key_is_in_a_real_record_but_those_only_code_no_fixture_runs_writes() -> None:
    seen: set[tuple[str, ...]] = set()
    for r in every():
        for key, value in r.details.items():
            seen.add((key,))
            if isinstance(value, dict):
                seen |= {(key, k) for k in value}
    hints = typing.get_type_hints(det.Details)
    wanted = {(k,) for k in hints}
    wanted |= {
        (k, sub) for k, hint in hints.items() if typing.is_typeddict(hint) for sub in typing.get_type_hints(hint)
    }
    assert wanted - seen == set(WRITTEN_ONLY), wanted - seen


# -- the accessors on real records -------------------------------------------------------------------------------


def test_the_accessors_read_real_records() -> None:
    server, tight, offline = one("llm_server"), one("llm_server_tight"), one("llm_offline")
    assert det.limits_of(server) == {
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 100,
        "source": "mlperf.conf llama3_1-8b Server",
    }
    assert det.held_to(server) == (2000.0, 100.0) and det.held_to(tight) == (1.0, 100.0)
    assert det.limits_of(offline) is not None and det.held_to(offline) is None  # Offline: recorded, held to none
    for r in (server, offline):
        n, read, written = r.details["requests"], r.details["input_tokens"], r.details["output_tokens"]
        assert det.token_counts(r) == (n, read, written) and det.mean_lengths(r) == (read / n, written / n)
        assert det.mean_lengths(r)[1] == 8  # --output-tokens 8, as counted
    assert det.target_qps(server) == server.details["target_qps"] > 0 and det.target_qps(offline) is None
    assert det.model_params(server) == server.details["model"]["params"] > det.model_params(one("llm_prompts")) > 0
    assert det.engine_of(server)["engine"] == "static" and det.served_model(server) == ""
    assert det.invalid_reasons(server) == [] and det.invalid_reasons(tight)[0].startswith("TTFT constraint not met")
    assert det.accuracy_gates(one("llm_accuracy")) == {"99%": True, "99.9%": True}
    assert set(det.accuracy_gates(one("resnet_accuracy"))) == {"fidelity"}  # bf16 on random weights: fidelity
    assert det.peak_of(one("gemm"))["unit"] == "TFLOPS" and det.peak_of(one("gemm"))["estimated"] is True
    assert det.model_source(one("train_llm")) == "config.json of huggingface.co/meta-llama/Llama-3.1-8B"
    assert det.model_source(server) is None and det.peak_of(server) == {} and det.sweep_of(server) is None
    first, last = records("llm_sweep")
    assert det.sweep_of(first)["id"] == det.sweep_of(last)["id"]
    assert [len(det.sweep_of(r)["points"]) for r in (first, last)] == [1, 2]
    found = det.find_peak_of(one("find_peak_sleep"))
    assert found["latency_bound_ms"] == det.latency_bound_ms(one("find_peak_sleep")) == 20
    assert found["trials"] and found["peak"] is not None
    assert det.prompts_of(one("llm_prompts"))["samples"] == 12
    assert det.score_of(one("tta_digits"))["runs"] == 3
    assert det.roofline_of(server)["bandwidth_source"]
    assert det.typed(server) is server.details  # the same dict, typed
    # a closed loop's tokens are of its steady window's requests, a replay's of its answered ones, not all sent
    closed = one("llm_closed").details
    assert det.mean_lengths(one("llm_closed")) == (
        closed["input_tokens"] / closed["measured"],
        closed["output_tokens"] / closed["measured"],
    )
    assert closed["measured"] < closed["requests"]


def test_the_request_log_entry_a_serving_run_writes_is_typed_and_read_back(tmp_path: Path) -> None:
    """serve.requests writes the file of a run's requests and its entry (RequestLogEntry); the record holding it
    validates, the accessor reads it, an entry of another shape is refused and read as none."""
    rows = [
        RequestRow(i, i, None, None, None, None, 0.1 * i, 0.1 * i + 0.01, None, 0.1 * i + 0.05, 12, 4,
                   array("d", [0.01] * 3), "ok", None)
        for i in range(3)
    ]  # fmt: skip
    entry = rq.write(tmp_path, "trace", rq.replay_meta("trace", None), rows)
    assert entry["rows"] == 3 and entry["failed"] == 0 and Path(entry["path"]).is_file()
    d = raw("llm_trace")[0]
    d["details"]["request_log"] = entry
    assert schema_errors(d) == []
    r = Result.from_dict(copy.deepcopy(d))
    assert det.request_log_of(r) == entry and rq.located(det.request_log_of(r), None) == Path(entry["path"])
    assert len(rq.read(Path(entry["path"])).rows) == 3
    d["details"]["request_log"]["rows"] = "three"
    assert schema_errors(d) == ["details/request_log/rows: 'three' is not of type 'integer'"]
    assert det.request_log_of(one("gemm")) is None  # not a serving run: no requests
    r.details["request_log"] = "requests.jsonl"
    assert det.request_log_of(r) is None


def test_an_accessor_gives_none_for_a_key_of_another_shape_never_the_value() -> None:
    r = one("llm_server")
    r.details |= {"limits": "2000/100", "model": ["llama"], "engine": None, "requests": True, "invalid_reasons": 3}
    assert det.limits_of(r) is None and det.held_to(r) is None
    assert det.model_params(r) is None and det.engine_of(r) == {} and det.token_counts(r) is None
    assert det.invalid_reasons(r) == []


# -- the layers that read every benchmark's records, on real ones -------------------------------------------------


def test_the_device_scaling_table_renders_from_the_real_two_device_pair() -> None:
    pair = records("train_scaling")
    assert sorted(int(r.params.get("nproc", 1)) for r in pair) == [1, 2]
    # the pair's intervals are clean (nothing set aside: make.py reran it until so), which is where the table read
    # each (low, high) interval as a half-width and raised TypeError
    assert all(r.metrics["throughput"].ci95 is not None and not concerns(r, "throughput") for r in pair)
    rows = scaling_rows(pair, describe=describe_params)
    assert [row.devices for row in rows] == [1, 2]
    one_device, two = (r.metrics["throughput"] for r in sorted(pair, key=lambda r: int(r.params.get("nproc", 1))))
    assert rows[0].speedup == 1.0 and rows[1].speedup == pytest.approx(two.value / one_device.value)
    assert rows[1].efficiency == pytest.approx(rows[1].speedup / 2)
    assert rows[1].note == "" or rows[1].note.startswith("within noise")  # told apart, or said to be within noise
    console = Console(width=200, record=True)
    console.print(scaling_table(rows))
    text = console.export_text()
    assert "ncf" in text and f"{rows[1].speedup:.2f}x" in text and "scaling over devices" in text


def test_the_judge_tells_real_serving_records_held_to_other_limits_apart() -> None:
    server, tight = one("llm_server"), one("llm_server_tight")
    said = _unlike(server, tight)
    assert "unlike limits: p99 TTFT/TPOT 2,000/100 ms vs p99 TTFT/TPOT 1/100 ms" in said, said
    again = copy.deepcopy(server)
    assert not any(w.startswith("unlike limits") for w in _unlike(server, again))
    # a --checkpoint folder is another model than the preset's tiny one
    assert any(w.startswith("unlike models") for w in _unlike(one("llm_offline"), one("llm_prompts")))


def test_history_reads_every_real_record_as_a_point_and_flags_nothing_from_one_run_each() -> None:
    recs = [r for r in every() if r.status == "ok" and r.primary_metric]
    series = histories(recs, describe=describe_params)
    points = sorted(p.record.id for s in series for p in s.points if p.record is not None)
    assert points == sorted(r.id for r in recs)  # each record a point of exactly one series
    assert all(not s.changes for s in series)  # one run a workload: nothing to flag against
    tight = next(
        s for s in series for p in s.points if p.record is not None and p.record.id == one("llm_server_tight").id
    )
    assert any(w.startswith("INVALID") for p in tight.points for w in p.set_aside)


def test_reference_matching_reads_limits_lengths_and_the_model_from_real_token_records() -> None:
    server_rows = {m.reference.source: m for m in matches(one("llm_server_tight"))}
    held = [m for m in server_rows.values() if m.reference.ttft_p99_ms is not None]
    assert held, "the MLPerf Server rows of llama3.1-8b"
    for m in held:
        assert any(w.startswith("TTFT/TPOT limits differ") and "1/100 ms here" in w for w in m.unlike), m.unlike
        assert any(w == "INVALID run" for w in m.unlike)
    for m in matches(one("llm_server")):
        assert not any(w.startswith("TTFT/TPOT limits differ") for w in m.unlike)
        assert "tiny model" in m.unlike
    server = one("llm_server")
    n, read, written = det.token_counts(server)
    assert (
        ref_tokens.own_lengths(server)
        == f"random prompts, {read / n:.0f} in / {written / n:.0f} out tokens per request"
    )
    prompts = one("llm_prompts")
    assert ref_tokens.fixed_lengths(prompts) == "prompts from qa.jsonl here, of varying lengths"
    published = PRESETS["llama3.1-8b"].published_params
    other = f"another model ({det.model_params(prompts):,.3g} parameters; llama3.1-8b has {published:,.3g})"
    assert ref_tokens.another_model(prompts) == other and ref_tokens.another_model(server) is None  # no --checkpoint
    assert matches(prompts) and all(other in m.unlike for m in matches(prompts))
    accuracy = [m for m in matches(one("llm_server")) if m.reference.benchmark]
    assert all(any("accuracy not checked in this run" in w for w in m.differences) for m in accuracy)


def _find(blocks: list[Any], sid: str) -> Section | None:
    for b in blocks:
        if isinstance(b, Section):
            if b.id == sid:
                return b
            found = _find(b.blocks, sid)
            if found is not None:
                return found
    return None


def test_the_report_reads_the_typed_details_of_every_real_record() -> None:
    recs = every()
    for r in recs:
        r.tags = {}  # the fixture's names: not tag groups for the report to compare
    doc = build(ReportInput(recs, describe=describe_params))
    tokens = _find(doc.sections, "inference-tokens")
    assert tokens is not None
    head, *figures = [b for b in tokens.blocks if isinstance(b, Table)]
    rows = [dict(zip(head.columns, [str(getattr(c, "text", c)) for c in row], strict=True)) for row in head.rows]
    token_runs = [r for r in recs if family_of(r.benchmark) is SERVE and is_token_run(r)]
    assert len(rows) == len(token_runs) == 10  # server, tight, offline, the sweep's two points, the closed loop,
    # prompts, prefix, trace, conversations
    held = {
        row["TTFT p99 / limit"].partition(" / ")[2] + " / " + row["TPOT p99 / limit"].partition(" / ")[2]
        for row in rows
    }
    assert {"2,000 ms / 100 ms", "1 ms / 100 ms", "(2,000 ms) / (100 ms)", " / "} == held  # the closed loop's: goodput
    tight = next(row for row in rows if row["TTFT p99 / limit"].endswith(" / 1 ms"))
    notes = next(b for b in tokens.blocks if isinstance(b, Bullets)).items
    assert tight["verdict"] == "INVALID"
    assert any(n.startswith(f"{tight['note'].split()[0]} TTFT constraint not met (LoadGen)") for n in notes)
    assert "mlperf.conf llama3_1-8b Server" in head.caption and any("STREAM" in t.caption for t in figures)
    charts = {b.name for b in tokens.blocks if isinstance(b, Chart)}
    assert "tokens-pareto" in charts  # the sweep's most complete record: two points
    assert limits(one("llm_server_tight")) == ("1 / 100 ms", "--ttft-ms and --tpot-ms")
    assert series_name(one("llm_server"), {}).startswith("llama3.1-8b static fp32 server")
    scaling = _find(doc.sections, "scaling")
    assert scaling is not None and any(isinstance(b, Chart) for b in scaling.blocks)
    assert _find(doc.sections, "tta") is not None


# -- every key a benchmark writes is declared where it is written ---------------------------------------------------


#: keys of records an older accelbench wrote (the report's store, tests/data/report_store.json), no writer's now:
#: a stored record keeps every key it holds
OLDER = {
    "infer/loadgen.samples_per_device: not declared in ImageDetails",  # now samples_per_worker
    "tta/time_to_target.price_per_hour_usd: not declared in TtaDetails",  # prices are now in system.price
}


def test_every_key_a_real_record_holds_is_declared_by_its_writer_with_the_type_it_holds() -> None:
    assert {r.benchmark.split("/")[0] for r in every()} >= {"infer", "kernels", "train", "tta"}
    assert [m for r in every() for m in writer_misfits(r)] == []
    # each source's record of its prompts is held to its own source's type, sub-records too: a key another source
    # writes is not declared there
    sources = {r.details["prompts"]["source"] for r in every() if "prompts" in r.details}
    assert sources == {"file", "random", "trace", "conversations"}
    trace, talks = one("llm_trace"), one("llm_conversations")
    trace.details["prompts"]["prefix"] = one("llm_prefix").details["prompts"]["prefix"]  # type: ignore[typeddict-unknown-key]
    talks.details["prompts"]["settings"]["max_prompt_tokens"] = 8  # type: ignore[typeddict-unknown-key]
    talks.details["prompts"]["turns"] = 2.5  # type: ignore[typeddict-unknown-key]
    assert writer_misfits(trace) == ["infer/llm.prompts.prefix: not declared in TracePrompts"]
    assert sorted(writer_misfits(talks)) == [
        "infer/llm.prompts.settings.max_prompt_tokens: not declared in ConversationSettings",
        "infer/llm.prompts.turns: 2.5 is not int",
    ]
    # the report's store: every kernel (gemm, conv, rnn, attention, sparse, membw, allreduce), made by older versions
    stored = json.loads((Path(__file__).parent / "data" / "report_store.json").read_text(encoding="utf-8"))
    misfits = {m for d in stored["records"] for m in writer_misfits(Result.from_dict(d))}
    assert misfits == OLDER, misfits - OLDER


def test_a_key_no_writer_declares_or_a_value_of_another_type_is_found() -> None:
    r = one("llm_offline")
    r.details["not_declared"] = 1  # type: ignore[typeddict-unknown-key]
    r.details["requests"] = "many"  # type: ignore[typeddict-item]
    assert sorted(writer_misfits(r)) == [
        "infer/llm.not_declared: not declared in ServingDetails",
        "infer/llm.requests: 'many' is not int",
    ]
