"""What a serving run says of itself: a client called limited only where it could bias the figure (issue 58, item
3), and a prompt or conversation file's broken rows said on the console and refused past a share (item 5).

The client's verdict is judged from recorded figures (the issue's own: 780.8 output tokens/s Offline, the client at
8.8% of a core, requests reaching its loop 9.04 ms after LoadGen issued them at p99) and from the watch fed the
same waits; the files go through the real CLI, against the stub server where a run must go on.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import UsageError
from accelbench.serve.engines.endpoint.watch import LATE_MS, ClientWatch, late, limited_by
from accelbench.serve.sources.prompts import MOST_BROKEN, check_broken, skipped_line

sys.path.insert(0, str(Path(__file__).parent))

#: the issue's Offline run, as its record kept the client's figures: the whole query waited for 4 connections
OFFLINE = {
    "connections": 4,
    "client_cpu_share": 0.088,
    "loop_lag_p99_ms": 0.41,
    "dispatch_p99_ms": 9.04,
    "requests": 1024,
    "queued_requests": 1020,
    "queue_wait_p99_ms": 61_800.0,
}


# --- item 3: client-limited only where the client could bias the figure


def test_an_offline_runs_dispatch_delay_is_its_queue_not_a_limited_client() -> None:
    assert OFFLINE["dispatch_p99_ms"] > LATE_MS  # what set the run aside
    assert limited_by(OFFLINE, arrivals=False) is None
    # a Server run with the same delay and its client saturated: both said
    saturated = limited_by(OFFLINE | {"client_cpu_share": 0.95}, arrivals=True)
    assert saturated is not None
    assert "busy 95% of the time" in saturated and "9.04 ms after they were issued (p99)" in saturated
    assert "1020 of 1024 requests waited for one of the 4 connections" in saturated
    # with arrivals, the delay alone is the client's: each request's TTFT is timed from its arrival
    delayed = limited_by(OFFLINE, arrivals=True)
    assert delayed is not None and "9.04 ms after they were issued" in delayed and "busy" not in delayed
    # without arrivals, a saturated thread or a late loop still holds answers unread, and so the next requests
    offline = limited_by(OFFLINE | {"client_cpu_share": 0.95, "loop_lag_p99_ms": 12.0}, arrivals=False)
    assert offline is not None and "busy 95%" in offline and "12 ms late" in offline and "issued" not in offline


def test_a_late_loop_is_the_clients_lateness_whatever_its_cpu_share() -> None:
    """A closed loop beside a busy server: the loop ran 9 ms late at p99 and requests reached it 8 ms late while
    the client process used 0.12 of a core. Starved, not busy, but its stamps are as late either way (a vLLM CPU
    server's ITL p50 read 0.013 ms: whole streams stamped in one burst), so it is said late, and why."""
    lagging = OFFLINE | {"loop_lag_p99_ms": 9.0, "dispatch_p99_ms": 8.0, "queued_requests": 0}
    starved = limited_by(lagging | {"process_cores": 0.12}, arrivals=True)
    assert starved is not None and "9 ms late at p99" in starved and "8 ms after they were issued" in starved
    said = late(lagging | {"process_cores": 0.12}, arrivals=True)
    assert said is not None and said.startswith("the client was late: ")
    assert "waited for a core other processes held" in said
    busy = late(lagging | {"process_cores": 0.7}, arrivals=True)
    assert busy is not None and "waited for a core" not in busy
    # the kernel's run queue, where Linux keeps it, says which: the host's cores, or the client's own work
    queued = late(lagging | {"process_cores": 0.12, "loop_runq_wait_share": 0.73}, arrivals=True)
    assert queued is not None and "73% of the run in the kernel's run queue" in queued
    own = late(lagging | {"process_cores": 0.12, "loop_runq_wait_share": 0.02}, arrivals=True)
    assert own is not None and "its own work held its loop" in own and "other processes held" not in own
    # without arrivals the dispatch is the query's own queue: only the loop's lag counts
    assert late(lagging | {"loop_lag_p99_ms": 1.0}, arrivals=False) is None
    assert late(lagging | {"loop_lag_p99_ms": 1.0}, arrivals=True) is not None


def test_the_watch_counts_its_process_cores_once_started() -> None:
    async def spin() -> dict[str, Any]:
        watch = ClientWatch()
        watch.start(asyncio.get_running_loop())
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:  # the loop's own thread busy: the process used about a core
            await asyncio.sleep(0)
        watch.stop()
        return watch.report(connections=1, arrivals=True)

    figures = asyncio.run(spin())
    assert 0.0 < figures["process_cores"] and "time.process_time" in figures["method"]
    assert figures["process_cores"] >= figures["client_cpu_share"] - 0.01  # the loop's thread is in the process


def test_the_watch_leaves_an_offline_runs_waits_unjudged_and_says_so() -> None:
    watch = ClientWatch()  # never started: its thread's CPU share is 0, its loop never late
    for _ in range(200):
        watch.waited(0.02, 2.0)  # each request reached the loop 20 ms after its issue, then waited 2 s to be sent
    offline = watch.report(connections=4, arrivals=False)
    assert offline["dispatch_p99_ms"] == pytest.approx(20.0) and offline["queued_requests"] == 200
    assert "limited_by" not in offline and "wait for a connection by design" in offline["not_judged"]
    for _ in range(200):
        watch.waited(0.02, 2.0)
    server = watch.report(connections=4, arrivals=True)
    assert "20 ms after they were issued" in server["limited_by"] and "not_judged" not in server


# --- item 5: a file's broken rows said, and refused past a share


def words(n: int, start: int = 0) -> str:
    from llm_server import WORDS

    return " ".join(WORDS[(start + i) % len(WORDS)] for i in range(n))


def chat(i: int, value: bool = True) -> dict[str, Any]:
    """One answered turn; ``value=False``: the human turn has no value (the issue's row)."""
    human: dict[str, Any] = {"from": "human", "value": words(6, i)} if value else {"from": "human"}
    return {"conversations": [human, {"from": "gpt", "value": words(4, i + 50)}]}


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_server import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("audit-ckpt"))


@pytest.fixture(scope="module")
def tokenizer(checkpoint: Path) -> Any:
    from accelbench.serve.sources.tokenizer import load_tokenizer

    return load_tokenizer(checkpoint)


def test_one_broken_conversation_of_38_is_said_and_the_run_goes_on(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    pytest.importorskip("aiohttp")
    from conftest import run_cli, stored

    from accelbench.serve.engines.endpoint.stub import Behaviour, serving

    rows = [chat(i, value=i != 6) for i in range(38)]  # the 7th line's human turn has no value
    file = jsonl(tmp_path / "chats.jsonl", rows)
    db = tmp_path / "c.db"
    with serving(Behaviour(tokenizer=str(checkpoint))) as url:
        args = ["infer", "llama3.1-8b", "--scale", "tiny", "--engine", "endpoint", "--url", url, "--tokenizer",
                str(checkpoint), "--db", str(db), "--conversations", str(file), "--scenario", "server",
                "--turns", "1", "--output-tokens", "4"]  # fmt: skip
        p = run_cli(args, cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    said = f"accelbench: {file}: skipped 1 of 38 conversations: empty prompt (line 7)"
    assert p.stderr.count(said) == 1, p.stderr  # once, though the parameters are checked more than once
    (record,) = stored(db)
    assert record.status == "ok", record.error
    prompts = record.details["prompts"]
    assert prompts["skipped"] == {"empty prompt": 1} and prompts["skipped_first"] == {"empty prompt": "line 7"}
    assert prompts["read"] == 38 and prompts["conversations"] == 37 and record.details["requests"] == 37


def test_more_broken_conversations_than_the_share_is_one_line_exit_2(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    from conftest import run_cli

    broken = {6, 9, 20, 30}  # 4 of 38: over a tenth
    assert len(broken) > MOST_BROKEN * 38
    file = jsonl(tmp_path / "chats.jsonl", [chat(i, value=i not in broken) for i in range(38)])
    args = ["infer", "llama3.1-8b", "--checkpoint", str(checkpoint), "--conversations", str(file), "--scenario",
            "server", "--db", str(tmp_path / "r.db")]  # fmt: skip
    p = run_cli(args, cli_env, tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == (
        f"accelbench: error: conversation file {file}: 4 of 38 conversations are broken (4 empty prompt; the first "
        "at line 7), more than the 10% a run passes over: fix or remove those rows"
    )
    assert "building" not in p.stdout + p.stderr  # refused before a run began


def test_a_prompt_file_read_by_the_same_reader_is_said_and_refused_alike(
    checkpoint: Path, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    from conftest import run_cli

    rows: list[dict[str, Any]] = [{"prompt": words(5, i), "output": words(3, i)} for i in range(20)]
    rows[3] = {"prompt": "   "}  # an empty prompt, line 4
    good = jsonl(tmp_path / "one.jsonl", rows)
    base = ["infer", "llama3.1-8b", "--checkpoint", str(checkpoint), "--db", str(tmp_path / "r.db")]
    p = run_cli([*base, "--prompts", str(good), "--dry-run"], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"accelbench: {good}: skipped 1 of 20 prompts: empty prompt (line 4)" in p.stderr, p.stderr
    rows[11] = {"id": 12}  # no prompt field, line 12
    rows[15] = {"text": ""}
    bad = jsonl(tmp_path / "three.jsonl", rows)
    p = run_cli([*base, "--prompts", str(bad)], cli_env, tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    broken = "3 of 20 prompts are broken (2 empty prompt, 1 no prompt field; the first at line 4)"
    assert f"prompt file {bad}: {broken}" in p.stderr, p.stderr


def test_sharegpt_rows_passed_over_by_design_are_said_but_not_refused(tmp_path: Path, tokenizer: Any) -> None:
    """A conversation no human opens or whose question is never answered is ShareGPT as published (vLLM drops
    them too), and a prompt over the asked length the run's own filter: said, never counted as broken."""
    from accelbench.serve.sources.conversations import read_conversations

    rows = [chat(i) for i in range(30)]
    for i in range(0, 30, 3):  # ten unanswered questions, a third of the file
        rows[i] = {"conversations": [{"from": "human", "value": words(4, i)}]}
    rows[1] = {"conversations": [{"from": "gpt", "value": words(3)}]}
    file = tmp_path / "published.json"
    file.write_text(json.dumps(rows))
    read = read_conversations(file, tokenizer, output_tokens=4)
    check_broken(read.summary, "conversations", "conversation file")  # none broken: no error
    assert skipped_line(read.summary, "conversations") == (
        "skipped 11 of 30 conversations: 10 no gpt answer after the first human turn (first at item 1), "
        "1 no human turn (item 2)"
    )


def test_a_conversation_cut_short_at_an_empty_question_is_counted(tmp_path: Path, tokenizer: Any) -> None:
    """A later human turn without text ends the conversation there, its later turns lost: a broken row, counted
    apart from the skipped ones (the conversation's earlier turns are still served)."""
    from accelbench.serve.sources.conversations import read_conversations

    rows = [chat(i) for i in range(12)]
    answered = chat(40)["conversations"]
    rows[4] = {"conversations": [*answered, {"from": "human"}, {"from": "gpt", "value": words(3)}, *answered]}
    rows[9] = {"conversations": [*answered, {"from": "human", "value": words(2)}]}  # unanswered last: as published
    file = jsonl(tmp_path / "cut.jsonl", rows)
    read = read_conversations(file, tokenizer, output_tokens=4)
    assert [len(c.turns) for c in read.conversations][4] == 1
    summary = read.summary
    assert summary["cut_short"] == {"empty prompt": 1} and summary["cut_short_first"] == {"empty prompt": "line 5"}
    cut = "1 of 12 conversations cut short at a later turn: empty prompt (line 5)"
    assert skipped_line(summary, "conversations") == cut
    check_broken(summary, "conversations", "conversation file")  # 1 of 12 is under the share
    rows[7] = rows[4]
    with pytest.raises(UsageError) as e:
        check_broken(read_conversations(jsonl(file, rows), tokenizer, output_tokens=4).summary, "conversations",
                     "conversation file")  # fmt: skip
    assert str(e.value) == (
        f"conversation file {file}: 2 of 12 conversations are broken (2 cut short (empty prompt in a later turn); "
        "the first at line 5), more than the 10% a run passes over: fix or remove those rows"
    )
