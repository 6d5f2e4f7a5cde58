"""Prompt sources: a shared prefix whose hit rate the server confirms, a trace replayed on time, conversations turn
by turn, MLPerf's own data set, each through the real CLI against the stub server (which keeps a real prefix cache
of blocks, counted by the served model's tokenizer), and bad input as one line.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("transformers")

from accelbench.errors import UsageError  # noqa: E402
from accelbench.serve.engines.endpoint.stub import Behaviour, serving  # noqa: E402
from accelbench.serve.sources.prefix import Ledger, Salt, block_chain, with_prefix  # noqa: E402
from accelbench.serve.specs import LLMServeParams  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from llm_server import make_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("sources-ckpt"))


def served(url: str, checkpoint: Path, db: Path, *more: str) -> list[str]:
    return ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "endpoint", "--url", url, "--tokenizer",
            str(checkpoint), "--db", str(db), *more]  # fmt: skip


def one_record(args: list[str], env: dict[str, str], cwd: Path, db: Path) -> Any:
    from conftest import run_cli, stored

    p = run_cli(args, env, cwd)
    assert p.returncode == 0, p.stdout + p.stderr
    (record,) = stored(db)
    assert record.status == "ok", record.error
    return record


# --- the pieces, on known answers


def test_a_shared_prefix_is_placed_as_asked_and_the_ledger_counts_what_a_cache_would_hold() -> None:
    prompts = [list(range(1000 + 100 * i, 1000 + 100 * i + 80)) for i in range(10)]
    made = with_prefix(prompts, 32, 0.5, 1, 30000)
    starts = sorted(made.starts)
    assert starts == [0] * 5 + [32] * 5  # half the prompts begin with the prefix
    shared = [p for p, s in zip(made.prompts, made.starts, strict=True) if s]
    assert all(p[:32] == shared[0][:32] and len(p) == 80 for p in shared)  # in place: the length is kept
    ledger = Ledger(made.prompts)
    for i in range(10):
        ledger.sent(i, made.prompts[i])
    # the first sharer's 2 blocks are new; the other 4 sharers find them (2 blocks of 16 each)
    assert ledger.report()["cached_tokens"] == 4 * 32
    assert ledger.report()["hit_rate"] == pytest.approx(128 / 800)
    ledger.reset()
    ledger.sent(0, made.prompts[0])  # sent again: known whole, as a server that keeps it
    assert ledger.report()["cached_tokens"] == (80 // 16) * 16


def test_salted_prompts_share_only_their_prefix() -> None:
    prompts = [list(range(1, 65))] * 2
    made = with_prefix(prompts, 32, 1.0, 1, 30000)
    salt = Salt(made.starts, 30000)
    ledger = Ledger(made.prompts)
    shape = ledger.shaper(salt)
    a, b, c = shape(0, made.prompts[0]), shape(0, made.prompts[0]), shape(1, made.prompts[1])
    assert a[:32] == b[:32] == c[:32] and a[32:34] != b[32:34] and len(a) == 64
    assert block_chain(a)[:2] == block_chain(b)[:2] and block_chain(a)[2] != block_chain(b)[2]
    assert ledger.report()["cached_tokens"] == 2 * 32  # the second and third find the prefix, nothing more
    # another run counts from elsewhere: a server's cache still holding the last run's prompts finds none of them
    again = Salt(made.starts, 30000)(0, made.prompts[0])
    assert again[:32] == a[:32] and again[32:34] not in (a[32:34], b[32:34])


def test_the_source_is_the_one_whose_settings_are_given(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_tokens": 8, "output_tokens": 4}\n')
    base = {"model": "llama3.1-8b", "scale": "tiny", "engine": "null"}
    assert LLMServeParams.of(**base).source == "random"
    assert LLMServeParams.of(**base, prefix_tokens=16).source == "random"
    p = LLMServeParams.of(**base, trace=str(trace), scenario="server")
    assert p.source == "trace" and p.to_dict()["trace"] == str(trace) and "input_jitter" not in p.to_dict()
    p.validate()
    with pytest.raises(UsageError, match="belong to different prompt sources"):
        LLMServeParams.of(**base, trace=str(trace), prefix_tokens=16)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"prefix_tokens": 128}, "--prefix-tokens 128 must be under the prompt's 128 tokens"),
        ({"prefix_share": 0.5}, "give --prefix-tokens N"),
        ({"prefix_tokens": 8, "prefix_share": 1.5}, "--prefix-share is a fraction"),
        ({"trace": "TRACE"}, "give --scenario server"),
        ({"trace": "TRACE", "scenario": "server", "mode": "find-peak"}, "replayed in performance mode"),
        ({"source": "conversations", "turns": 0, "scenario": "server"}, "--turns must be"),
        ({"source": "mlperf", "mlperf_data": "MISSING"}, "does not exist"),
        ({"source": "file"}, "--source file reads --prompts FILE"),
        ({"source": "tarce"}, "unknown source 'tarce': choose one of random, file, mlperf, .*; did you mean trace?"),
    ],
)
def test_bad_source_input_is_one_line(tmp_path: Path, extra: dict[str, Any], words: str) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_tokens": 8, "output_tokens": 4}\n')
    values = {k: (str(trace) if v == "TRACE" else str(tmp_path / "none") if v == "MISSING" else v)
              for k, v in extra.items()}  # fmt: skip
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(")", r"\)")) as e:
        p = LLMServeParams.of(model="llama3.1-8b", scale="tiny", engine="null", **values)
        p.validate()
    assert "\n" not in str(e.value)


def test_a_trace_out_of_time_order_and_an_mlperf_folder_without_its_file_are_one_line_exit_2(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    from conftest import run_cli

    trace = tmp_path / "late.jsonl"
    rows = [(0.0, 8, 4), (1.5, 8, 4), (1.2, 8, 4)]
    trace.write_text("".join(json.dumps({"timestamp": t, "input_tokens": i, "output_tokens": o}) + "\n"
                             for t, i, o in rows))  # fmt: skip
    base = ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "null", "--scenario", "server"]
    p = run_cli([*base, "--trace", str(trace)], cli_env, tmp_path)
    assert p.returncode == 2 and "line 3's timestamp 1.2 s is before line 2's 1.5 s" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    empty = tmp_path / "mlperf"
    empty.mkdir()
    p = run_cli([*base[:-2], "--mlperf-data", str(empty)], cli_env, tmp_path)
    assert p.returncode == 2 and "cnn_eval.json" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


# --- end to end against the stub's prefix cache


def test_a_shared_prefix_gives_the_hit_rate_sent_and_the_server_confirms_it(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """512 shared tokens before 90% of 1,024-token prompts: an ideal cache serves about 0.9 x 512 / 1,024 of the
    prompt tokens; the stub's cache (blocks of 16 tokens, by the served tokenizer) reports what it served, within 5
    points of what was sent. Random prompts are distinct past the prefix, so nothing else is shared."""
    db = tmp_path / "p.db"
    with serving(Behaviour(prefix_block=16, tokenizer=str(checkpoint))) as url:
        args = served(url, checkpoint, db, "--input-tokens", "1024", "--input-jitter", "1", "--output-tokens", "4",
                      "--prefix-tokens", "512", "--prefix-share", "0.9", "--duration", "1")  # fmt: skip
        record = one_record(args, cli_env, tmp_path, db)
    cache = record.details["prefix_cache"]
    sent, server = cache["sent"]["hit_rate"], cache["served"]["hit_rate"]
    assert sent == pytest.approx(0.9 * 512 / 1024, abs=0.03)
    assert abs(server - sent) <= 0.05, cache
    assert record.params["source"] == "random" and record.params["prefix_tokens"] == 512
    assert record.details["prompts"]["prefix"]["requests_with_prefix"] == round(0.9 * 64)
    assert not record.has("repeated-prompts")


def test_a_60_row_trace_replays_on_time_with_offered_and_served_load(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    rng = random.Random(0)
    at, rows = 0.0, []
    for _ in range(60):
        at += rng.expovariate(30.0)  # about 30 requests a second, two seconds
        lengths = {"input_tokens": rng.randint(40, 200), "output_tokens": rng.randint(4, 12)}
        rows.append({"timestamp": round(at, 4), **lengths})
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "t.db"
    with serving(Behaviour(prefix_block=16, tokenizer=str(checkpoint))) as url:
        record = one_record(served(url, checkpoint, db, "--trace", str(trace), "--scenario", "server"), cli_env,
                            tmp_path, db)  # fmt: skip
    d, m = record.details, record.metrics
    assert d["driver"]["name"] == "accelbench replay" and d["requests"] == d["answered"] == 60
    assert m["offered_requests_per_second"].value == pytest.approx(59 / (rows[-1]["timestamp"] - rows[0]["timestamp"]))
    assert m["requests_per_second"].value > 0 and m["ttft_p99_ms"].value > 0
    # every request sent within 10 ms of its timestamp, by the driver's own clock, in the record
    assert m["issue_late_max_ms"].value <= 10.0 and d["driver"]["late_requests"] == 0, m["issue_late_max_ms"]
    assert d["prompts"]["rows"] == 60 and d["prompts"]["source"] == "trace"
    assert record.details["output_tokens"] == sum(max(r["output_tokens"], 2) for r in rows)
    assert d["prefix_cache"]["sent"]["hit_rate"] < 0.05  # rows share nothing, and the probe sent none of them


def test_conversations_send_each_turn_after_its_answer_with_its_history(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """Synthetic 4-turn conversations: each turn's TTFT in the record, each turn's prompt the history so far (so a
    prefix cache serves the history: the server's count confirms it)."""
    db = tmp_path / "c.db"
    with serving(Behaviour(prefix_block=16, tokenizer=str(checkpoint))) as url:
        args = served(url, checkpoint, db, "--source", "conversations", "--turns", "4", "--scenario", "server",
                      "--input-tokens", "64", "--output-tokens", "8", "--batch-size", "4")  # fmt: skip
        record = one_record(args, cli_env, tmp_path, db)
    turns = record.details["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3, 4] and all(t["requests"] == 64 for t in turns)
    lengths = [t["prompt_tokens_mean"] for t in turns]
    assert lengths == [64, 64 + 8 + 64, 64 + 2 * (8 + 64), 64 + 3 * (8 + 64)]  # the history grows by each turn
    assert all(t["ttft_p50_ms"] > 0 for t in turns) and "ttft_growth_ms_per_turn" in record.metrics
    cache = record.details["prefix_cache"]
    assert cache["sent"]["hit_rate"] > 0.4 and cache["served"]["hit_rate"] > 0.4  # the history, held
    assert record.details["driver"]["users"] == 4


def test_mlperf_llama31_8b_data_gives_mlperfs_lengths_and_targets(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """cnn_eval.json in MLPerf's layout (a few rows made here): its token ids served as they are, MLPerf's 128 most
    output tokens, its accuracy target named and said not to apply to a part of the set."""
    folder = tmp_path / "mlperf"
    folder.mkdir()
    rng = random.Random(1)
    ids = [[rng.randint(3, 40) for _ in range(30 + i)] for i in range(5)]
    rows = [{"instruction": "Summarize", "input": "an article", "tok_input": t, "output": "a summary"} for t in ids]
    (folder / "cnn_eval.json").write_text(json.dumps(rows))
    db = tmp_path / "m.db"
    with serving() as url:
        record = one_record(served(url, checkpoint, db, "--mlperf-data", str(folder)), cli_env, tmp_path, db)
    prompts = record.details["prompts"]
    assert prompts["source"] == "mlperf" and prompts["samples"] == 5
    assert prompts["max_output_tokens_mlperf"] == 128 and prompts["output_tokens"]["max"] == 128
    assert prompts["mlperf_samples"] == 13368 and prompts["served_whole"] is False
    target = prompts["mlperf_accuracy_target"]
    assert target["values"]["rouge1"] == pytest.approx(38.7792) and target["applies"] is False
    assert record.params["output_tokens"] == 128  # every request asked for MLPerf's most


def test_a_mooncake_traces_shared_blocks_reach_the_servers_cache(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """Mooncake's hash ids stand for blocks of 512 tokens: rows that share one share that block of their synthesized
    prompt, so the reuse sent is the trace's own (shared_fraction) and the server's cache serves it."""
    from accelbench.serve.sources.traces import read_trace, shared_fraction

    rows = []
    for i in range(30):  # every row opens with block 1; the even rows share block 2 too; the rest is their own
        ids = [1, 2 if i % 2 == 0 else 1000 + i, 2000 + i]
        rows.append({"timestamp": 40 * i, "input_length": 1100, "output_length": 4, "hash_ids": ids})
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    expected = shared_fraction(read_trace(trace))
    db = tmp_path / "m.db"
    with serving(Behaviour(prefix_block=16, tokenizer=str(checkpoint))) as url:
        record = one_record(served(url, checkpoint, db, "--trace", str(trace), "--scenario", "server"), cli_env,
                            tmp_path, db)  # fmt: skip
    assert record.details["prompts"]["format"] == "mooncake" and record.details["prompts"]["block_tokens"] == 512
    cache = record.details["prefix_cache"]
    assert cache["sent"]["hit_rate"] == pytest.approx(expected, abs=0.02)
    assert abs(cache["served"]["hit_rate"] - cache["sent"]["hit_rate"]) <= 0.05, cache


def test_a_sharegpt_files_conversations_are_served_turn_by_turn(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    def turns(*pairs: str) -> dict[str, Any]:
        return {"conversations": [{"from": "human" if i % 2 == 0 else "gpt", "value": v} for i, v in enumerate(pairs)]}

    conversations = [
        turns("the cat sat", "on a mat", "what is two plus four", "two plus four", "hello", "hello be brief"),
        turns("what sat on the mat", "the cat", "the dog ran", "the dog ran on a mat"),
        {"conversations": [{"from": "system", "value": "be brief"}, *turns("hello", "hello")["conversations"]]},
    ]
    file = tmp_path / "chats.json"
    file.write_text(json.dumps(conversations))
    db = tmp_path / "f.db"
    with serving(Behaviour(prefix_block=4, tokenizer=str(checkpoint))) as url:
        args = served(url, checkpoint, db, "--conversations", str(file), "--scenario", "server", "--turns", "3")
        record = one_record(args, cli_env, tmp_path, db)
    assert record.params["source"] == "conversations" and record.details["prompts"]["conversations"] == 3
    turns_seen = [(t["turn"], t["requests"]) for t in record.details["turns"]]
    assert turns_seen == [(1, 3), (2, 2), (3, 1)]  # three, two and one turns answered
    means = [t["prompt_tokens_mean"] for t in record.details["turns"]]
    assert means[0] < means[1] < means[2]  # each turn carries its history


def test_records_of_other_prompt_sources_or_reuse_are_unlike() -> None:
    from test_details import records

    from accelbench.families import unlike

    server, trace = records("llm_server")[0], records("llm_trace")[0]
    offline, prefix = records("llm_offline")[0], records("llm_prefix")[0]
    assert "unlike prompt sources: random vs trace" in unlike(server, trace)
    assert any(w.startswith("unlike prefix reuse: 0% vs 4") for w in unlike(offline, prefix)), unlike(offline, prefix)
    assert not any("prompt sources" in w or "prefix reuse" in w for w in unlike(offline, offline))


def test_the_transformers_engine_shares_prefix_blocks_only_where_prefixes_are_shared(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """Its paged cache shares blocks (allow_block_sharing) for a run with a shared prefix and says it counts none;
    random prompts alone leave sharing off, as before."""
    base = ["infer", "llama3.1-8b", "--scale", "tiny", "--input-tokens", "64", "--output-tokens", "4"]
    shared = one_record([*base, "--prefix-tokens", "48", "--db", str(tmp_path / "a.db")], cli_env, tmp_path,
                        tmp_path / "a.db")  # fmt: skip
    assert shared.details["engine"]["prefix_sharing"] is True
    assert shared.details["prefix_cache"]["served"].startswith("not reported: the transformers engine shares")
    assert shared.metrics["prefix_reuse_sent"].value > 0.5
    plain = one_record([*base, "--db", str(tmp_path / "b.db")], cli_env, tmp_path, tmp_path / "b.db")
    assert plain.details["engine"]["prefix_sharing"] is False and "prefix_reuse_sent" not in plain.metrics


def test_a_replay_answers_in_time_order_and_one_that_stalls_fails_saying_so() -> None:
    """The driver straight on the null engine: conversations of 3 turns, each turn's prompt its history (the turn
    before and its answer); an engine that stops answering fails the replay once nothing came back for the
    timeout, not after a fixed time from the start."""
    from accelbench.errors import BenchmarkFailed
    from accelbench.serve.engines.base import EngineSettings, NullEngine
    from accelbench.serve.replay import Driver
    from accelbench.serve.sources.base import Work
    from accelbench.serve.sources.conversations import synthetic_conversations

    convs = synthetic_conversations(6, 3, 10, 4, 100)
    work = Work.talks(convs.conversations, convs.summary)
    engine = NullEngine(NullEngine.Options())
    driver = Driver(engine, work, users=2)
    engine.start(None, None, driver, EngineSettings(max_batch=2))  # type: ignore[arg-type]
    try:
        run = driver.run(timeout=30)
    finally:
        engine.stop()
    assert len(run.sent) == 18 and all(s.done is not None for s in run.sent)
    by_turn = {t: [s.prompt_tokens for s in run.sent if s.turn == t] for t in range(1, 4)}
    assert by_turn == {1: [10] * 6, 2: [24] * 6, 3: [38] * 6}  # 10, + 4 answered + 10, + 4 + 10

    class Silent(NullEngine):
        def serve(self, batch: list[Any]) -> None:  # takes the requests, answers none
            pass

    silent = Silent(Silent.Options())
    stalled = Driver(silent, work, users=2)
    silent.start(None, None, stalled, EngineSettings(max_batch=2))  # type: ignore[arg-type]
    try:
        with pytest.raises(BenchmarkFailed, match="the replay stalled: 0 of 2 requests answered"):
            stalled.run(timeout=0.3)
    finally:
        silent.stop()
