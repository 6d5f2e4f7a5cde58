"""The serving figures (:mod:`accelbench.serve.figures`) of rows built by hand, each checked exactly (times in
binary fractions of a second, so every TTFT, TPOT and gap in ms is exact), and every record reaching them: LoadGen's
SUT, accelbench's replay and closed loop, and ``accelbench results requests`` from the file written."""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

import pytest

import accelbench.registry  # noqa: F401  (the benchmarks registered: a record names its own)
from accelbench.loadgen.start import Outcome
from accelbench.serve import drive, figures, requests, results
from accelbench.serve.figures import Load, Window
from accelbench.serve.limits import Limits
from accelbench.serve.replay import Replayed
from accelbench.serve.rows import InFlight, RequestRow
from accelbench.serve.specs import LLMServeParams
from accelbench.serve.sut import TokenSUT


def row(n: int, sent: float, first: float | None, done: float, out: int, gaps: list[float], **who: Any) -> RequestRow:
    status, error = ("ok", None) if first is not None else ("failed", "HTTP 500: stub")
    return RequestRow(n, n, who.get("user"), who.get("session"), who.get("turn"), who.get("due"), sent, first, None,
                      done, 10, out, array("d", gaps), status, error)  # fmt: skip


#: (sent, first, done, output tokens, gaps, due): TTFT 125..625 ms; TPOT 125, 62.5, 125, none (one token), 250 ms
TRACE = [
    (0.0, 0.125, 0.5, 4, [0.125] * 3, 0.0),
    (0.25, 0.5, 0.6875, 4, [0.0625] * 3, 0.25),
    (0.5, 0.875, 1.0, 2, [0.125], 0.5),
    (0.75, 1.25, 1.25, 1, [], 0.625),  # sent 125 ms after it was due
    (1.0, 1.625, 2.375, 4, [0.25] * 3, 1.0),
    (1.25, None, 1.5, 0, [], 1.25),  # failed
]


def trace() -> list[RequestRow]:
    return [row(n, s, f, d, o, g, due=due) for n, (s, f, d, o, g, due) in enumerate(TRACE)]


def test_each_figure_of_a_trace_s_rows() -> None:
    m = figures.measure(trace(), Load.of("trace"), ttft_ms=400.0, tpot_ms=130.0)
    span = 2.375  # the first send to the last answer
    assert (len(m.answered), len(m.counted), m.span, m.window) == (5, 5, span, None)
    expected = {
        "tokens_per_second": 15 / span,
        "requests_per_second": 5 / span,
        # late: five on time, one 125 ms (linear between the closest ranks: p99 at rank 4.95 of 6)
        "issue_late_p50_ms": 0.0,
        "issue_late_p99_ms": 118.75,
        "issue_late_max_ms": 125.0,
        "ttft_p50_ms": 375.0,
        "tpot_p50_ms": 125.0,  # of the four answers past one token: 62.5, 125, 125, 250
        "ttft_p90_ms": 575.0,
        "tpot_p90_ms": 212.5,
        "ttft_p99_ms": 620.0,
        "tpot_p99_ms": 246.25,
        "tokens_per_second_per_user": 8.0,
        "itl_p50_ms": 125.0,  # ten gaps: three of 62.5, four of 125, three of 250
        "itl_p90_ms": 250.0,
        "itl_p99_ms": 250.0,
        "offered_requests_per_second": 5 / 1.25,  # six due over 1.25 s
        "goodput_requests_per_second": 3 / span,  # TTFT <= 400 and TPOT <= 130: the first three
        "goodput_tokens_per_second": 10 / span,
    }
    assert list(m.values) == list(expected)  # the record's order
    # each exact; three interpolate at a rank whose fraction (0.7, 0.95, 0.97) is no binary fraction: the last bit
    assert m.values == pytest.approx(expected, rel=4e-16, abs=0)
    assert {k: v for k, v in m.values.items() if v != expected[k]}.keys() <= {
        "tpot_p90_ms", "tpot_p99_ms", "issue_late_p99_ms"
    }  # fmt: skip
    # an answer of one token has no TPOT to be over: within a TPOT limit, judged on its TTFT alone
    more = figures.measure(trace(), Load.of("trace"), ttft_ms=500.0, tpot_ms=130.0).values
    assert more["goodput_requests_per_second"] == 4 / span and more["goodput_tokens_per_second"] == 11 / span


def test_loadgen_s_rows_have_no_schedule_and_a_conversation_s_no_offered_rate() -> None:
    """Who sent the rows decides which figures exist, not how one is computed: the same rows under LoadGen (no due
    times) and as conversations (a schedule made by answers, not offered) give the same latencies."""
    trace_figures = figures.measure(trace(), Load.of("trace")).values
    undue = [row(n, s, f, d, o, g) for n, (s, f, d, o, g, _) in enumerate(TRACE)]
    loadgen = figures.measure(undue, Load()).values
    assert not any(k.startswith(("issue_late", "offered")) for k in loadgen)
    assert loadgen == {k: v for k, v in trace_figures.items() if not k.startswith(("issue_late", "offered"))}
    talks = figures.measure(trace(), Load.of("conversations")).values
    assert set(trace_figures) - set(talks) == {"offered_requests_per_second"}
    assert figures.measure([row(0, 0.0, None, 1.0, 0, [])], Load()).values == {}  # nothing answered: no figure


def closed() -> list[RequestRow]:
    """Two users of a closed loop, four requests each; answers 0.25 s after each send."""
    sends = {0: [0.0, 1.0, 2.0, 3.0], 1: [0.0, 1.5, 2.5, 3.5]}
    rows = [(at, u) for u, times in sends.items() for at in times]
    return [row(n, at, at + 0.125, at + 0.25, 2, [0.125], user=u, due=at) for n, (at, u) in enumerate(sorted(rows))]


def test_a_closed_loop_s_figures_are_its_steady_window_s() -> None:
    """The window runs from every user's first send past its warm-up (1.5 s: user 1's second) to every user's last
    full round (3.5 s: user 1's fourth); the answers inside it are those of the sends at 1.5, 2, 2.5 and 3."""
    rows = closed()
    assert figures.steady(rows, users=2) == Window(1.5, 3.5)
    assert figures.steady(rows, users=3) is None  # a user that sent nothing
    assert figures.steady(rows[:4], users=2) is None  # too few past the warm-up
    m = figures.measure(rows, Load.of("closed", 2))
    assert m.window == Window(1.5, 3.5) and [r.sent for r in m.inside] == [1.5, 2.0, 2.5, 3.0]
    assert m.counted == m.inside and m.span == 2.0 and len(m.answered) == 8
    assert m.values["requests_per_second"] == 2.0 and m.values["tokens_per_second"] == 4.0
    assert m.values["latency_p50_ms"] == 250.0 and m.values["ttft_p99_ms"] == 125.0
    assert "latency_p50_ms" not in figures.measure(rows, Load.of("trace")).values  # a trace's users do not wait


def test_each_turn_of_conversations_and_the_ttft_s_growth() -> None:
    """Two conversations of three turns: TTFT 62.5 and 125 ms on the first turn, doubled and tripled after, so the
    median grows 93.75 ms a turn."""
    rows = []
    for session in (0, 1):
        for turn in (1, 2, 3):
            ttft = 0.0625 * (session + 1) * turn
            at = 10.0 * turn + session
            rows.append(row(len(rows), at, at + ttft, at + ttft + 0.5, 3, [0.25, 0.25], session=session, turn=turn))
    m = figures.measure(rows, Load.of("conversations"))
    assert m.turns == [
        {"turn": 1, "requests": 2, "prompt_tokens_mean": 10.0, "ttft_p50_ms": 93.75, "ttft_p99_ms": 124.375},
        {"turn": 2, "requests": 2, "prompt_tokens_mean": 10.0, "ttft_p50_ms": 187.5, "ttft_p99_ms": 248.75},
        {"turn": 3, "requests": 2, "prompt_tokens_mean": 10.0, "ttft_p50_ms": 281.25, "ttft_p99_ms": 373.125},
    ]
    assert m.values["ttft_growth_ms_per_turn"] == 93.75
    assert figures.ttft_growth(m.turns[:1]) is None  # one turn: no slope


def test_a_request_in_flight_becomes_its_row() -> None:
    """The builder both drivers stamp: k tokens at once are k gaps of a k-th of the wait; times from the start."""
    f = InFlight(7, 3, 12, 100.0, scheduled=0.5)
    f.first = f.last = 100.25
    f.step(100.5, 1)
    f.step(101.0, 2)
    f.done, f.output_tokens = 101.0, 4
    r = f.row(99.5)
    assert (r.sent, r.first, r.done, list(r.gaps)) == (0.5, 0.75, 1.5, [0.25, 0.25, 0.25])
    assert (r.status, r.error) == ("ok", None)
    assert r.ttft == 0.25 and r.tpot == 0.25
    assert InFlight(8, 3, 12, 100.0).row(99.5).error == "no answer (the replay ended first)"  # a stall's
    assert RequestRow.from_dict(r.to_dict()) == r


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[RequestRow], Load]]:
    """Every call of :func:`figures.measure`: its rows and load."""
    calls: list[tuple[list[RequestRow], Load]] = []
    measure = figures.measure

    def spy(rows: list[RequestRow], load: Load, *limits: Any) -> figures.RunFigures:
        calls.append((rows, load))
        return measure(rows, load, *limits)

    monkeypatch.setattr(figures, "measure", spy)
    return calls


def test_loadgen_s_record_takes_the_sut_s_figures_from_the_one_function(
    spied: list[tuple[list[RequestRow], Load]], tmp_path: Path
) -> None:
    params = LLMServeParams(model="llama3.1-8b", scale="tiny", scenario="offline")
    record = params.to_dict() | {"precision": "fp32", "device": "cpu", "threads": 1}
    record |= {"input_tokens": 10, "output_tokens": 4}
    sut = TokenSUT(engine=None, qsl=None, max_new_tokens=None)  # type: ignore[arg-type]
    sut.rows = [row(n, s, f, d, o, g) for n, (s, f, d, o, g, _) in enumerate(TRACE[:5])]
    sut.samples, sut.tokens, sut.input_tokens = 5, 15, 50
    detail = {"result_validity": "VALID", "result_tokens_per_second": 6.0, "result_samples_per_second": 2.0}
    result = results.token_result(params, record, Outcome(detail, {}, tmp_path, sut), {}, Limits(400.0, 130.0, "t"),
                                  {}, None)  # fmt: skip
    assert spied == [(sut.rows, Load())]
    again = figures.recompute(requests.RequestLog(tmp_path, {"driver": "LoadGen"}, sut.rows), 400.0, 130.0)
    taken = figures.SUT_FIGURES + figures.SUT_OFFLINE_FIGURES
    assert {k: result.metrics[k].value for k in taken} == {k: again[k] for k in taken}
    assert result.metrics["tokens_per_second"].value == 6.0  # LoadGen's own, not the rows'


@pytest.mark.parametrize("kind", ["trace", "closed"])
def test_a_replay_s_record_and_its_file_reach_the_one_function(
    kind: str, spied: list[tuple[list[RequestRow], Load]], tmp_path: Path
) -> None:
    rows, users = (trace(), None) if kind == "trace" else (closed(), 2)
    run = Replayed(rows, 0.0, 4.0, kind, users, 0.0, 2)
    params = LLMServeParams(model="llama3.1-8b", scale="tiny", scenario="server")
    record = params.to_dict() | {"precision": "fp32", "device": "cpu", "threads": 1}
    record |= {"input_tokens": 10, "output_tokens": 4}
    result = drive.replay_result(params, record, run, {}, Limits(400.0, 130.0, "t", judged=False), {}, {}, None)
    entry = requests.keep_replayed(run, tmp_path, rows, kind, users)
    log = requests.read(Path(entry["path"]))
    again = figures.recompute(log, 400.0, 130.0)
    assert spied == [(rows, Load.of(kind, users)), (log.rows, Load.of(kind, users))] and log.rows == rows
    assert again == {k: result.metrics[k].value for k in again}
    assert set(result.metrics) - set(again) == {"tokens_per_second_per_device"}
