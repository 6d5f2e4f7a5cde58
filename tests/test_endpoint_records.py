"""Endpoint records (issue 45, item 6): one server is one label whatever the outcome, the served model is asked of
the server, and an Offline run is never one batch. Against the stub server, through the suite's worker (the path
that builds failed and skipped records from the entry's parameters).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("transformers")

from accelbench.registry import describe_params  # noqa: E402
from accelbench.results.record import Result  # noqa: E402
from accelbench.serve.engines.endpoint.engine import OFFLINE_MIN_WAVES, EndpointEngine  # noqa: E402
from accelbench.serve.engines.endpoint.stub import MODEL, Behaviour, serving  # noqa: E402
from accelbench.serve.specs import LLMServeParams  # noqa: E402
from accelbench.suite.suites import make_entry  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from llm_server import make_checkpoint  # noqa: E402

BENCHMARK = "infer/llm"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("endpoint-records-ckpt"))


def settings(url: str, checkpoint: Path, **kw: Any) -> dict[str, Any]:
    base = dict(model="llama3.1-8b", scale="tiny", engine="endpoint", url=url, tokenizer=str(checkpoint),
                scenario="offline", output_tokens=4, duration=0.5)  # fmt: skip
    return base | kw


def run_entry(values: dict[str, Any], log_dir: Path) -> Result:
    """The entry run as the suite runs it (its records built by the worker, a failure's from the entry)."""
    from accelbench.suite.worker import run_inline

    (record,) = run_inline(make_entry(BENCHMARK, values), log_dir)
    return record


def label(r: Result) -> tuple[str, str, Any, Any]:
    """What a table shows of a record: its description, its device (the server, its port aside: each stub has its
    own), and the settings that name the system."""
    p = r.params
    device = str(p["device"]).replace(p["url"].split("/")[2], "HOST:PORT")
    return describe_params(r.benchmark, p), device, p["precision"], p.get("served_model")


def test_a_failed_a_skipped_and_an_ok_record_of_one_server_share_one_label(checkpoint: Path, tmp_path: Path) -> None:
    """The trial's failed record said ``auto`` for the device and precision where its ok one said ``server at
    HOST:PORT`` and ``unstated``: two systems in the tables for one server."""
    with serving(Behaviour(fail_every=5)) as url:
        failed = run_entry(settings(url, checkpoint, served_model=MODEL), tmp_path / "failed")
    assert failed.status == "failed" and "probe requests failed" in (failed.error or "")
    with serving() as url:
        ok = run_entry(settings(url, checkpoint, served_model=MODEL), tmp_path / "ok")
        # a TPOT limit no request meets: skipped after the probe, with the entry's parameters
        skipped = run_entry(settings(url, checkpoint, served_model=MODEL, tpot_ms=1e-6, scenario="server"),
                            tmp_path / "skipped")  # fmt: skip
    assert ok.status == "ok", ok.error
    assert skipped.status == "skipped" and "out of reach" in (skipped.reason or ""), skipped.reason
    assert ok.params["device"] == f"server at {url.split('/')[2]}" and ok.params["precision"] == "unstated"
    assert label(failed) == label(ok) == ("llama3.1-8b offline endpoint serving stub 128/4 tokens bs<=8 unstated "
                                          "quick tiny", "server at HOST:PORT", "unstated", MODEL)  # fmt: skip
    assert label(skipped)[1:] == label(ok)[1:] and skipped.params["device"] == ok.params["device"]


def test_an_entry_states_the_server_and_reads_back_as_asked(checkpoint: Path) -> None:
    """The recorded form (``server at HOST:PORT``, ``unstated``) is a stored entry's, and reads back as auto (what
    the run resolves); a precision given is kept; any other engine's parameters are untouched."""
    values = settings("http://10.0.0.2:8000/v1", checkpoint)
    entry = make_entry(BENCHMARK, values)
    assert (entry.params["device"], entry.params["precision"]) == ("server at 10.0.0.2:8000", "unstated")
    again = LLMServeParams.of(**entry.params)
    assert (again.device, again.precision) == ("auto", "auto") and again.to_dict() == entry.params
    assert make_entry(BENCHMARK, entry.params).key == entry.key  # a resumed run finds its entries
    assert make_entry(BENCHMARK, values | {"precision": "bf16"}).params["precision"] == "bf16"
    local = make_entry(BENCHMARK, {"model": "llama3.1-8b", "scale": "tiny", "engine": "null"}).params
    assert (local["device"], local["precision"]) == ("auto", "auto")
    # an older record's auto reads as the server's precision in the label
    old = entry.params | {"device": "auto", "precision": "auto"}
    assert describe_params(BENCHMARK, old) == describe_params(BENCHMARK, entry.params)


def test_the_served_model_is_asked_of_the_server_when_not_named(checkpoint: Path) -> None:
    """Without --served-model the one model GET /v1/models lists is the one measured, and named as if given."""
    from dataclasses import replace

    with serving() as url:
        p = LLMServeParams.of(**settings(url, checkpoint))
        engine = EndpointEngine(p.engine_opts)
        engine.configure(p)
    assert p.engine_options["served_model"] == "" and engine.facts["served_model"] == MODEL
    named = replace(p, engine_options=p.engine_options | engine.resolved())
    given = LLMServeParams.of(**settings(url, checkpoint, served_model=MODEL))
    assert describe_params(BENCHMARK, named.to_dict()) == describe_params(BENCHMARK, given.to_dict())
    assert f"endpoint serving {MODEL} " in describe_params(BENCHMARK, named.to_dict())


def test_an_ok_record_without_served_model_names_the_served_model(checkpoint: Path, tmp_path: Path) -> None:
    with serving() as url:
        ok = run_entry(settings(url, checkpoint), tmp_path)
    assert ok.status == "ok", ok.error
    assert ok.params["served_model"] == MODEL and f"serving {MODEL}" in describe_params(BENCHMARK, ok.params)


@pytest.mark.parametrize("batch, scenario, least", [(8, "offline", 32), (1, "offline", 4), (8, "server", 0)])
def test_an_offline_endpoint_run_is_never_one_batch(checkpoint: Path, batch: int, scenario: str, least: int) -> None:
    """The trial's Offline run was VALID on 6 and 8 requests at concurrency 8: one wave, all ramp and tail."""
    p = LLMServeParams.of(**settings("http://127.0.0.1:8000/v1", checkpoint, batch_size=batch, scenario=scenario))
    assert EndpointEngine.min_requests(p) == least
    if scenario == "offline":
        assert least == OFFLINE_MIN_WAVES * batch and OFFLINE_MIN_WAVES >= 4


def test_a_failed_record_without_served_model_names_the_model_the_server_serves(
    checkpoint: Path, tmp_path: Path
) -> None:
    """Without --served-model, a failed run is labelled with the model the server said it serves, as an ok one
    is: one server, one series."""
    with serving(Behaviour(fail_every=5)) as url:
        failed = run_entry(settings(url, checkpoint), tmp_path / "failed")
    with serving() as url:
        ok = run_entry(settings(url, checkpoint), tmp_path / "ok")
    assert failed.status == "failed" and ok.status == "ok", (failed.error, ok.error)
    assert failed.params["served_model"] == ok.params["served_model"] == MODEL
    assert label(failed) == label(ok)
