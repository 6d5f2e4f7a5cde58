"""A generating engine owns its settings: declared once in its ``Options``, surfaced as flags of ``accelbench infer``
for language models, checked, handed to the engine, recorded flat and read back from older records; ``infer/llm``'s
own parameters hold none of them, and ``tune`` searches what the engine's own declaration offers."""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import UsageError
from accelbench.params import NoOptions, build_params, opt
from accelbench.results.compare import workload_key
from accelbench.results.record import SCHEMA_VERSION, Result
from accelbench.serve.engines.base import NullEngine, TokenRequest
from accelbench.serve.engines.continuous import ContinuousBatching
from accelbench.serve.engines.static import StaticBatch
from accelbench.serve.specs import LLMServeParams
from accelbench.tune.candidate import Candidate
from accelbench.tune.serve import serve_default, shapes

sys.path.insert(0, str(Path(__file__).parent))

BENCHMARK = "infer/llm"
ENGINE_SETTINGS = {
    "page_size", "kv_blocks", "max_batch_tokens", "engine_compile", "url", "served_model", "api", "api_key_env",
    "tokenizer", "server_devices", "request_timeout", "accuracy_target",
}  # fmt: skip


@dataclass(frozen=True)
class EchoOptions(NoOptions):
    token: int = opt(7, "the token every answer repeats", sweep=False)

    def check(self) -> None:
        if self.token < 0:
            raise UsageError(f"token must not be negative, got {self.token}")


class Echo(NullEngine):
    """A user's engine with a setting of its own: answers every request with ``token``, repeated."""

    name = "echo"
    Options = EchoOptions
    options: EchoOptions

    def serve(self, batch: list[TokenRequest]) -> None:
        for r in batch:
            self.sink.first(r, self.options.token)
            self.sink.done(r, [self.options.token] * r.max_new_tokens)


USER = f"{__name__}:Echo"


def test_the_run_holds_no_engine_setting_and_each_engine_declares_its_own() -> None:
    own = {f.name for f in fields(LLMServeParams)}
    assert not own & ENGINE_SETTINGS
    assert ENGINE_SETTINGS <= {f.name for f, _ in LLMServeParams.flags()}  # each a flag of infer
    p = build_params(LLMServeParams, {"model": "llama3.1-8b", "scale": "tiny", "page_size": 32}, BENCHMARK)
    assert p.engine_options == {"page_size": 32, "kv_blocks": 0, "max_batch_tokens": 0, "engine_compile": False}
    d = p.to_dict()
    assert d["page_size"] == 32 and "engine_options" not in d and "url" not in d  # flat, and only its engine's
    static = build_params(LLMServeParams, {"model": "llama3.1-8b", "scale": "tiny", "engine": "static"}, BENCHMARK)
    assert static.engine_options == {"engine_compile": False}


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"engine": "static", "page_size": 32}, "--page-size applies to the transformers, vllm engines, not static"),
        ({"url": "http://127.0.0.1:1/v1"}, "--url applies to the endpoint engine, not transformers"),
        ({"engine": "null", "engine_compile": True}, "--engine-compile applies to the transformers, static, vllm"),
        ({"page_size": 0}, "--page-size must be a positive integer"),
        ({"kv_blocks": -1}, "--kv-blocks must not be negative"),
        ({"engine": "endpoint"}, "--engine endpoint needs --url"),
        ({"engine": USER, "token": -1}, "token must not be negative"),
        ({"engine": USER, "tokn": 3}, "infer/llm has no parameter 'tokn'"),
    ],
)
def test_a_setting_is_checked_by_its_engine_and_refused_by_the_others(values: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        build_params(LLMServeParams, {"model": "llama3.1-8b", "scale": "tiny"} | values, BENCHMARK)


def test_an_engine_is_built_with_its_settings() -> None:
    p = build_params(LLMServeParams, {"model": "llama3.1-8b", "engine": "static", "engine_compile": True}, BENCHMARK)
    assert isinstance(p.engine_opts, StaticBatch.Options) and p.engine_opts.engine_compile is True
    assert StaticBatch(p.engine_opts).options.engine_compile is True
    assert StaticBatch().options == StaticBatch.Options()  # the defaults where none are given


def test_a_users_engine_takes_its_own_setting_in_a_real_run(tmp_path: Path) -> None:
    from accelbench.suite.suites import make_entry
    from accelbench.suite.worker import run_inline

    quick = {"scenario": "offline", "expected_qps": 3000, "duration": 0.1}  # one short query (test_llm_serving)
    entry = make_entry(BENCHMARK, {"model": "llama3.1-8b", "scale": "tiny", "engine": USER, "token": 3} | quick)
    assert entry.params["token"] == 3 and "page_size" not in entry.params
    (record,) = run_inline(entry, tmp_path)
    assert record.status == "ok", record.error
    assert record.params["token"] == 3 and record.params["engine"] == USER
    assert record.metrics["tokens_per_second"].value > 0 and record.details["requests"] >= 300


def test_an_older_record_keeps_only_its_engines_settings_and_pairs_with_a_new_one() -> None:
    """Before engines owned their settings, every infer/llm record carried all of them (the endpoint's address on a
    local engine's record too): read back, it pairs with today's record of the same run."""
    new = build_params(LLMServeParams, {"model": "llama3.1-8b", "scale": "tiny"}, BENCHMARK).to_dict()
    endpoint_defaults = {
        "url": "", "served_model": "", "api": "completions", "api_key_env": "", "tokenizer": "", "server_devices": 1,
        "request_timeout": 600.0, "accuracy_target": "",
    }  # fmt: skip
    older = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": BENCHMARK,
        "params": new | endpoint_defaults,
        "status": "ok",
    }
    read = Result.from_dict(older)
    assert not set(endpoint_defaults) & set(read.params)
    assert workload_key(read) == workload_key(Result(BENCHMARK, new))


def test_tune_searches_what_an_engine_declares() -> None:
    """Continuous batching offers its batch-token budget around its default; the static batch offers nothing."""
    assert ContinuousBatching.search({"batch_size": 8}) == [{"max_batch_tokens": 128}, {"max_batch_tokens": 1024}]
    assert StaticBatch.search({"batch_size": 8}) == []

    class Params:
        batch_sizes = "8"

    best = [Candidate(serve_default()), Candidate(serve_default() | {"engine": "static"})]
    tried = [c.settings for c in shapes(Params(), best, "cpu")]  # type: ignore[arg-type]
    assert [s.get("max_batch_tokens") for s in tried if s["engine"] == "transformers"] == [None, 128, 1024]
    assert [s for s in tried if s["engine"] == "static"] == [serve_default() | {"engine": "static"}]
