"""A record's label and concerns say what ran: ranks apart from devices in a training label, and the lengths a
serving run sent where they are not those its label (the run's identity) asks for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import writer_misfits

from accelbench.kit.context import Prepared
from accelbench.loadgen.start import Outcome
from accelbench.registry import describe_params
from accelbench.results.record import KINDS, Result
from accelbench.serve.labels import jittered_prompts
from accelbench.serve.limits import Limits, draw_prompts
from accelbench.serve.results import token_result
from accelbench.serve.specs import LLMServeParams
from accelbench.serve.sut import TokenSUT
from accelbench.train.llm.specs import LLMTrainParams
from accelbench.train.specs import TrainParams

# -- item 6: ranks on devices ---------------------------------------------------------------------------------


@pytest.fixture
def fake_accelerator() -> Iterator[None]:
    """tests/fake_kind.py's accelerator, registered for one test (it claims every CPU device while it is)."""
    from fake_kind import KIND

    from accelbench.devices.kind import register, unregister

    register(KIND)
    try:
        yield
    finally:
        unregister(KIND.name)


def _recorded(params: Any, device: str) -> dict[str, Any]:
    """The params a run records (the device as the run resolved it), as the console labels them."""
    return Prepared(torch.device(device), 1).record(params)


def test_two_ranks_on_one_cpu_are_not_two_devices() -> None:
    params = LLMTrainParams(model="llama3.1-8b", scale="tiny", nproc=2, device="cpu")
    record = _recorded(params, "cpu")
    label = describe_params("train/llm", record)
    assert "devices" not in label and "x2 ranks on 1 device" in label, label
    # two nodes of one CPU each: four ranks on two devices, as the record's ``devices`` detail counts them
    label = describe_params("train/llm", record | {"nnodes": 2})
    assert "x4 ranks on 2 devices" in label, label
    resnet = _recorded(TrainParams(model="resnet18", scale="tiny", nproc=2, device="cpu"), "cpu")
    label = describe_params("train/throughput", resnet)
    assert "devices" not in label and "x2 ranks on 1 device" in label, label


def test_a_label_that_cannot_know_the_device_says_ranks() -> None:
    """Before a run (``device = auto``) nothing says whether each rank has a device of its own."""
    p = {"model": "llama3.1-8b", "batch_size": 8, "nproc": 2, "seq_len": 128, "scale": "tiny"}
    assert describe_params("train/llm", p) == "llama3.1-8b bs=8/device fp32 x2 ranks seq=128 tiny"
    assert "x1" not in describe_params("train/llm", p | {"nproc": 1})


def test_ranks_of_an_accelerator_kind_are_devices(fake_accelerator: None) -> None:
    params = LLMTrainParams(model="llama3.1-8b", scale="tiny", nproc=2, device="fakeaccel")
    record = _recorded(params, "cpu")
    assert record["device"] == "fakeaccel"
    assert "x2 devices" in describe_params("train/llm", record)
    resnet = _recorded(TrainParams(model="resnet18", scale="tiny", nproc=2, device="fakeaccel"), "cpu")
    assert "x2 devices" in describe_params("train/throughput", resnet)
    assert "x2 devices" in describe_params("train/llm", {"model": "llama3.1-8b", "nproc": 2, "device": "cuda:0"})


# -- item 4: the lengths sent ---------------------------------------------------------------------------------


#: random prompts drawn 0.8..1 x --input-tokens long (--input-jitter 0.8)
JITTERED: dict[str, Any] = {"source_options": {"input_jitter": 0.8}}


def _served(sut_figures: tuple[int, int, int], engine: dict[str, Any], tmp_path: Path, **settings: Any) -> Result:
    """The record of a Server run whose SUT counted ``sut_figures`` (requests, prompt tokens, output tokens), as
    token_result assembles it from LoadGen's detail log (its figures are not what is judged here)."""
    params = LLMServeParams(model="llama3.1-8b", scale="tiny", **settings)
    record = params.to_dict() | {"precision": "unstated", "device": "cpu", "threads": 1}
    record |= {"input_tokens": params.input_tokens or 128, "output_tokens": params.output_tokens or 32}
    sut = TokenSUT(engine=None, qsl=None, max_new_tokens=None)  # type: ignore[arg-type]
    sut.samples, sut.input_tokens, sut.tokens = sut_figures
    detail = {"result_validity": "VALID", "result_completed_tokens_per_second": 200.0}
    outcome = Outcome(detail, {}, tmp_path, sut)
    return token_result(params, record, outcome, {}, Limits(None, None, "none"), engine, None)


def test_answers_short_of_asked_where_eos_was_not_ignored_are_a_concern(tmp_path: Path) -> None:
    """The figures of a run against ``transformers serve`` (it refuses ignore_eos): 429 requests answered with
    30.2 tokens on average of the 32 asked, prompts of 113 drawn with a jitter of 0.8 (the default before it was 1)."""
    requests = 429
    result = _served(
        (requests, 113 * requests, round(30.2 * requests)), {"ignore_eos_sent": False}, tmp_path, **JITTERED
    )
    found = [c for c in result.concerns if c.kind == "lengths-differ"]
    assert len(found) == 1 and "lengths-differ" in KINDS
    c = found[0]
    assert "32" in c.text and "30.2" in c.text and "ignore_eos" in c.text, c.text
    assert c.data["asked_out"] == 32 and c.data["mean_out"] == pytest.approx(30.2, abs=0.01)
    assert c.data["ignore_eos"] is False and c.text in result.warnings
    # 113 is within chance of the 115 that 102..128 averages: the jitter asked for it, so prompts are not flagged
    assert "prompts" not in c.text and c.data["expected_in"] == 115
    assert result.params["input_tokens"] == 128 and result.params["output_tokens"] == 32  # the identity stays


def test_exact_lengths_have_no_concern(tmp_path: Path) -> None:
    requests = 64
    drawn = draw_prompts(64, 128, 0.8, 1000)  # the random source's own prompts, each sent once
    sent_in = sum(map(len, drawn))
    result = _served((requests, sent_in, 32 * requests), {"ignore_eos_sent": True}, tmp_path, **JITTERED)
    assert not any(c.kind == "lengths-differ" for c in result.concerns), result.warnings
    exact = _served((requests, 128 * requests, 32 * requests), {}, tmp_path)  # the default: every prompt 128
    assert not any(c.kind == "lengths-differ" for c in exact.concerns), exact.warnings


def test_prompts_off_the_jitters_mean_are_a_concern(tmp_path: Path) -> None:
    """Prompts of 100 tokens when 102..128 was drawn (a server's tokenizer counting otherwise), and a prompt of
    127 where every one was asked 128 long: both said, with what was expected."""
    requests = 429
    result = _served((requests, 100 * requests, 32 * requests), {}, tmp_path, **JITTERED)
    (c,) = [c for c in result.concerns if c.kind == "lengths-differ"]
    assert "prompts of 100.0 tokens" in c.text and "115 expected" in c.text and "answers" not in c.text, c.text
    exact = _served((requests, 127 * requests, 32 * requests), {}, tmp_path)
    (c,) = [c for c in exact.concerns if c.kind == "lengths-differ"]
    assert "prompts of 127.0 tokens" in c.text and "128 expected" in c.text, c.text


def test_the_jitters_expected_mean_is_what_the_source_draws() -> None:
    low, mean, sd = jittered_prompts(128, 0.8)
    drawn = [len(p) for p in draw_prompts(20000, 128, 0.8, 50)]
    assert low == min(drawn) and max(drawn) == 128
    assert mean == pytest.approx(sum(drawn) / len(drawn), abs=0.2)
    assert sd == pytest.approx(float(torch.tensor(drawn, dtype=torch.float64).std()), rel=0.02)
    assert jittered_prompts(128, 1.0) == (128, 128.0, 0.0)


def test_a_server_that_read_other_prompts_than_were_sent_is_a_concern() -> None:
    """The endpoint client keeps the server's count of each answered request's prompt and the tokens it sent it;
    prompts of 128 tokens whose text the server read as 131 (a chat template it adds) are said, both means kept;
    within a token, or with no count from the server, nothing is said."""
    from accelbench.serve.labels import flag_server_lengths

    off = Result("infer/llm", {})
    flag_server_lengths(off, {"server_prompt_tokens_mean": 131.0, "sent_prompt_tokens_mean": 128.0})
    [c] = off.concerns
    assert c.kind == "server-lengths" and c.kind in KINDS
    assert c.data == {"sent_in": 128.0, "server_in": 131.0} and "131.0 tokens" in c.text
    near = Result("infer/llm", {})
    flag_server_lengths(near, {"server_prompt_tokens_mean": 127.2, "sent_prompt_tokens_mean": 128.0})
    flag_server_lengths(near, {})  # a server that counted nothing
    assert near.concerns == []


def test_random_prompts_with_a_shared_prefix_are_labelled_with_the_lengths_asked(tmp_path: Path) -> None:
    """Random prompts' lengths are the run's flags, a shared prefix among them or not: the record states
    --input-tokens (its identity, as without a prefix), and the jittered mean sent raises no lengths concern."""
    from accelbench.suite.suites import make_entry
    from accelbench.suite.worker import run_inline

    values = dict(model="llama3.1-8b", scale="tiny", engine="null", scenario="server", target_qps=200, input_tokens=256,
                  input_jitter=0.8, output_tokens=4, prefix_tokens=64, prefix_share=0.75, duration=0.3)  # fmt: skip
    (record,) = run_inline(make_entry("infer/llm", values), tmp_path)
    assert record.status == "ok", record.error
    assert record.params["input_tokens"] == 256 and record.details["prompts"]["prefix"]
    mean = record.details["input_tokens"] / record.details["requests"]
    assert jittered_prompts(256, 0.8)[1] - 8 < mean < 240  # the jitter's mean (230.5), not the asked 256
    assert not record.has("lengths-differ"), record.warnings
    assert "prompts 0.8..1x prefix 64x0.75 256/4 tokens" in describe_params("infer/llm", record.params)
    # LoadGen's path counts what the engine was sent besides its test: the probe's batches of 8 and its single
    unmeasured = record.details["unmeasured_requests"]
    assert (unmeasured["preflight"], unmeasured["warmup"]) == (0, 0) and unmeasured["probe"] % 8 == 1
    assert 2 * 8 + 1 <= unmeasured["probe"] <= (1 + 6) * 8 + 1 and writer_misfits(record) == []
    assert ("earlier_tests" in unmeasured) == bool(record.details.get("reruns"))  # a rerun's tests and probes


def test_random_prompts_are_as_long_as_asked_unless_a_jitter_is_asked() -> None:
    """--input-jitter is 1 unless given (as vLLM's bench serve --dataset-name random and AIPerf draw): every prompt
    --input-tokens long, and a label of lengths alone; under 1 the label says the prompts were drawn shorter, beside
    the lengths (the longest), as a record made when 0.8 was the default does (its params carry the jitter)."""
    import json

    from accelbench.serve.sources.random_tokens import RandomSource

    p = LLMServeParams.of(model="llama3.1-8b", scale="tiny", engine="null")
    assert p.source_opts.input_jitter == 1.0 and p.to_dict()["input_jitter"] == 1.0
    work = RandomSource(p.source_opts).work(p, 500, 64, (128, 32))
    assert {len(x) for x in work.prompts} == {128}
    label = describe_params("infer/llm", p.to_dict())
    assert "prompts" not in label and " 128/32 tokens" in label, label
    jittered = LLMServeParams.of(model="llama3.1-8b", scale="tiny", engine="null", input_jitter=0.8)
    assert "null prompts 0.8..1x 128/32 tokens" in describe_params("infer/llm", jittered.to_dict())
    [old] = json.loads((Path(__file__).parent / "data" / "records" / "llm_offline.json").read_text())["records"]
    r = Result.from_dict(old)  # made at the old default, 0.8: read as it was made
    assert r.params["input_jitter"] == 0.8 and "prompts 0.8..1x 128/8 tokens" in describe_params(r.benchmark, r.params)
    # a prompt file's record keeps no jitter, and gains no words from the default that fills it in
    from_file = {"model": "llama3.1-8b", "scale": "tiny", "engine": "null", "source": "file", "prompts": "/x/p.jsonl"}
    assert "..1x" not in describe_params("infer/llm", from_file)
