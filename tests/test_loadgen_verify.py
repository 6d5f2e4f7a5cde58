"""MLPerf's compliance tests judged from real LoadGen runs of a tiny SUT built here: an honest SUT passes TEST01,
TEST04 and TEST06, and the cheat each test exists to catch fails it, with the file the checker reads saying so.

Every performance-mode run is Offline with ``min_duration_ms = 0`` and a fixed sample count, its SUT sleeping a
fixed time per sample in one sleep per query: two honest runs score within a few percent of each other however
busy the host, so the 10% of TEST01 and TEST04 is decided by the SUT, not by timing luck.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelbench.errors import UsageError
from accelbench.loadgen import verify

lg = pytest.importorskip("mlperf_loadgen")

#: compliance/TEST01/<model>/audit.config, with a sampling target for a 300-sample run
TEST01_AUDIT = "*.*.mode = 2\n*.*.accuracy_log_rng_seed = 720381539243781796\n*.*.accuracy_log_sampling_target = 60\n"
#: compliance/TEST04/audit.config
TEST04_AUDIT = "".join(
    f"*.{s}.mode = 2\n*.{s}.performance_issue_unique = 0\n*.{s}.performance_issue_same = 1\n"
    f"*.{s}.performance_issue_same_index = 3\n"
    for s in ("MultiStream", "Offline", "SingleStream", "Server")
)
#: compliance/TEST06/audit.config
TEST06_AUDIT = (
    "*.*.mode = 2\n*.*.accuracy_log_rng_seed = 720381539243781796\n*.*.accuracy_log_sampling_target = 100\n"
    "*.*.min_query_count = 100\n*.*.min_duration = 0\n*.*.sample_concatenate_permutation = 0\n"
)
SAMPLES = 300  #: samples an Offline performance run issues
COST_S = 0.001  #: what one sample costs the SUT
EOS = 2


class SUT:
    """Answers sample ``i`` with int32 ``[i * 7 % 1000]`` after ``COST_S`` a sample (one sleep for a query).

    ``cache``: a sample answered before costs nothing (the cheat TEST04 catches); ``cheat``: outside accuracy mode
    the answer is off by one (the cheat TEST01 catches). The honest SUT runs the same code with both off.
    """

    def __init__(self, cache: bool = False, cheat: bool = False) -> None:
        self.cache, self.cheat = cache, cheat
        self.seen: set[int] = set()
        self.accuracy_mode = False

    def issue(self, queries: list[Any]) -> None:
        unseen = [q for q in queries if not (self.cache and q.index in self.seen)]
        self.seen.update(q.index for q in queries)
        time.sleep(COST_S * len(unseen))
        off = 0 if self.accuracy_mode or not self.cheat else 1
        answers = [np.array([q.index * 7 % 1000 + off], dtype=np.int32) for q in queries]
        lg.QuerySamplesComplete(
            [lg.QuerySampleResponse(q.id, a.ctypes.data, a.nbytes) for q, a in zip(queries, answers, strict=True)]
        )


class TokenSUT:
    """A language model's answers, sample ``i``: ``2 + i % 5`` tokens ending in one EOS, the first token reported
    on its own first. ``double_eos`` ends each answer in two EOS tokens; ``miscount`` reports one token more than
    the answer has; ``wrong_first`` reports a first token that is not the answer's."""

    def __init__(self, double_eos: bool = False, miscount: bool = False, wrong_first: bool = False) -> None:
        self.double_eos, self.miscount, self.wrong_first = double_eos, miscount, wrong_first
        self.accuracy_mode = False

    def issue(self, queries: list[Any]) -> None:
        for q in queries:
            tokens = [100 + q.index % 50 + k for k in range(1 + q.index % 5)] + [EOS] * (2 if self.double_eos else 1)
            answer = np.array(tokens, dtype=np.int32)
            first = answer[:1] + (1 if self.wrong_first else 0)
            lg.FirstTokenComplete([lg.QuerySampleResponse(q.id, first.ctypes.data, first.nbytes, 1)])
            count = answer.size + (1 if self.miscount else 0)
            lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, answer.ctypes.data, answer.nbytes, count)])


def run(
    out: Path,
    sut: SUT | TokenSUT,
    mode: Any = None,
    audit: str | None = None,
    scenario: Any = None,
    samples: int = SAMPLES,
    tokens: bool = False,
) -> Path:
    """One LoadGen run of ``sut`` into ``out``, with ``audit`` as its audit.config (none: no audit.config)."""
    settings = lg.TestSettings()
    settings.scenario = scenario if scenario is not None else lg.TestScenario.Offline
    settings.mode = mode if mode is not None else lg.TestMode.PerformanceOnly
    settings.min_duration_ms = 0
    settings.min_query_count = SAMPLES
    settings.offline_expected_qps = 1 / COST_S
    settings.single_stream_expected_latency_ns = 100_000
    settings.use_token_latencies = tokens
    out.mkdir(parents=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(out)
    log.log_output.copy_summary_to_stdout = False
    config = out.parent / f"{out.name}.audit.config"  # absent for a run with no audit: LoadGen finds none
    if audit is not None:
        config.write_text(audit)
    sut.accuracy_mode = settings.mode == lg.TestMode.AccuracyOnly
    handle = lg.ConstructSUT(sut.issue, lambda: None)
    qsl = lg.ConstructQSL(samples, samples, lambda _: None, lambda _: None)
    try:
        lg.StartTestWithLogSettings(handle, qsl, settings, log, str(config))
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(handle)
    return out


def ratio(v: verify.Verification) -> float:
    match = re.search(r"^test / reference = (\S+)$", v.files["verify_performance.txt"], re.M)
    assert match, v.files
    return float(match.group(1))


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def runs01(tmp_path: Path, sut: SUT) -> verify.Verification:
    accuracy = run(tmp_path / "accuracy", sut, lg.TestMode.AccuracyOnly)
    performance = run(tmp_path / "performance", sut)
    audit = run(tmp_path / "TEST01", sut, audit=TEST01_AUDIT)
    return verify.test01(accuracy, performance, audit, "int32")


def test_test01_passes_an_honest_sut(tmp_path: Path) -> None:
    v = runs01(tmp_path, SUT())
    assert v.passed and v.why == [], v.files
    assert v.test == "TEST01" and set(v.files) == {"verify_accuracy.txt", "verify_performance.txt"}
    accuracy = v.files["verify_accuracy.txt"]
    assert "TEST PASS" in lines(accuracy)  # the checker's test: a line that is exactly TEST PASS
    compared = int(re.search(r"the same answer = (\d+)", accuracy).group(1))  # type: ignore[union-attr]
    assert compared > 0 and "a different answer = 0 " in accuracy
    assert "TEST PASS" in v.files["verify_performance.txt"] and 0.9 <= ratio(v) <= 1.1


def test_test01_fails_a_sut_that_answers_otherwise_in_performance_mode(tmp_path: Path) -> None:
    v = runs01(tmp_path, SUT(cheat=True))
    accuracy = v.files["verify_accuracy.txt"]
    assert not v.passed and "TEST PASS" not in lines(accuracy) and "TEST FAIL" in accuracy
    assert len(v.why) == 1 and "differ from the accuracy run's answer for the same sample" in v.why[0]
    assert "the same answer = 0" in accuracy
    assert "TEST PASS" in v.files["verify_performance.txt"]  # its speed is as honest as its accuracy run


def runs04(tmp_path: Path, sut: SUT) -> verify.Verification:
    # 10000 samples to draw from: the performance run repeats a sample so rarely that caching cannot help it
    performance = run(tmp_path / "performance", sut, samples=10_000)
    audit = run(tmp_path / "TEST04", sut, audit=TEST04_AUDIT, samples=10_000)
    return verify.test04(performance, audit)


def test_test04_passes_an_honest_sut(tmp_path: Path) -> None:
    v = runs04(tmp_path, SUT())
    assert v.passed and v.why == [], v.files
    assert v.test == "TEST04" and set(v.files) == {"verify_performance.txt"}
    text = v.files["verify_performance.txt"]
    assert "TEST PASS" in text and "the audit run may be at most 10% faster" in text
    assert ratio(v) < 1.1


def test_test04_fails_a_sut_that_caches_answers_by_sample(tmp_path: Path) -> None:
    v = runs04(tmp_path, SUT(cache=True))
    text = v.files["verify_performance.txt"]
    assert not v.passed and "TEST PASS" not in text and "TEST FAIL" in text
    assert ratio(v) >= 5  # the one sample is answered from the cache: the audit run is far faster
    assert len(v.why) == 1 and "more is the mark of answers cached by sample" in v.why[0]


def run06(tmp_path: Path, sut: TokenSUT, scenario: Any = None) -> Path:
    scenario = scenario if scenario is not None else lg.TestScenario.SingleStream
    return run(tmp_path / "TEST06", sut, audit=TEST06_AUDIT, scenario=scenario, samples=64, tokens=True)


def test_test06_passes_a_token_sut(tmp_path: Path) -> None:
    v = verify.test06(run06(tmp_path, TokenSUT()), "SingleStream", eos_token_id=EOS)
    assert v.passed and v.why == [], v.files
    text = lines(v.files["verify_accuracy.txt"])
    assert {"First token check pass: True", "EOS check pass: True", "Sample length check pass: True"} <= set(text)
    assert "TEST06: 100 answers in the audit run's accuracy log (SingleStream), decoded as int32" in text


def test_test06_skips_the_first_token_in_offline(tmp_path: Path) -> None:
    v = verify.test06(run06(tmp_path, TokenSUT(), lg.TestScenario.Offline), "Offline", eos_token_id=EOS)
    assert v.passed, v.files
    assert "First token check pass: Skipped" in lines(v.files["verify_accuracy.txt"])


def test_test06_fails_answers_that_end_in_two_eos_tokens(tmp_path: Path) -> None:
    v = verify.test06(run06(tmp_path, TokenSUT(double_eos=True)), "SingleStream", eos_token_id=EOS)
    text = lines(v.files["verify_accuracy.txt"])
    assert not v.passed and "EOS check pass: False" in text and "TEST06 verification failed" in text
    assert {"First token check pass: True", "Sample length check pass: True"} <= set(text)
    assert len(v.why) == 1 and "100 answers end in 2 or more EOS tokens (id 2;" in v.why[0]


def test_test06_fails_a_token_count_that_is_not_the_answers_length(tmp_path: Path) -> None:
    v = verify.test06(run06(tmp_path, TokenSUT(miscount=True)), "SingleStream", eos_token_id=EOS)
    text = lines(v.files["verify_accuracy.txt"])
    assert not v.passed and "Sample length check pass: False" in text and "EOS check pass: True" in text
    assert len(v.why) == 1 and "length is not their reported token count" in v.why[0]


def test_test06_fails_a_first_token_that_is_not_the_answers(tmp_path: Path) -> None:
    v = verify.test06(run06(tmp_path, TokenSUT(wrong_first=True)), "SingleStream", eos_token_id=EOS)
    assert not v.passed and "First token check pass: False" in lines(v.files["verify_accuracy.txt"])


def test_test06_without_an_eos_id_says_the_check_was_not_made(tmp_path: Path) -> None:
    """The checker needs ``EOS check pass: True``: with no EOS id to check by, the test cannot pass."""
    v = verify.test06(run06(tmp_path, TokenSUT()), "SingleStream")
    text = lines(v.files["verify_accuracy.txt"])
    assert not v.passed and "EOS check pass: Skipped" in text and "TEST06 verification failed" in text
    assert v.why == ["the EOS check was not made: no EOS token id was given"]


def test_a_missing_or_unreadable_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match=rf"^mlperf_log_detail.txt is missing in {re.escape(str(empty))}$"):
        verify.test04(empty, empty)
    audit = run06(tmp_path, TokenSUT())
    with pytest.raises(UsageError, match=rf"^mlperf_log_accuracy.json is missing in {re.escape(str(empty))}$"):
        verify.test01(empty, audit, audit, "int32")
    with pytest.raises(UsageError, match="is not a LoadGen accuracy log"):
        (empty / "mlperf_log_accuracy.json").write_text("[\n{ broken")
        verify.test01(empty, audit, audit, "int32")
    with pytest.raises(UsageError, match="bytes are not whole int64 values; is the dtype right"):
        verify.test06(audit, "SingleStream", EOS, dtype="int64")  # some answers hold an odd number of int32
    with pytest.raises(UsageError, match="says the audit run was SingleStream"):
        verify.test06(audit, "Offline", EOS)


# The decisions where MLCommons' scripts are looser than their rule, on logs written here (a LoadGen run cannot
# be made to hit each edge at will).
def write_logs(folder: Path, answers: list[dict[str, Any]], **detail: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    keys = {"effective_test_mode": "PerformanceOnly", "result_validity": "VALID"} | detail
    (folder / "mlperf_log_detail.txt").write_text(
        "".join(f':::MLLOG {{"key": "{k}", "value": {json.dumps(v)}}}\n' for k, v in keys.items())
    )
    (folder / "mlperf_log_accuracy.json").write_text(json.dumps(answers))
    return folder


def hexed(*values: int) -> str:
    return np.array(values, dtype=np.int32).tobytes().hex().upper()


def test_test01_compares_whole_answers_not_only_their_first_element(tmp_path: Path) -> None:
    scored = {"effective_scenario": "Offline", "result_samples_per_second": 100.0}
    accuracy = write_logs(tmp_path / "accuracy", [{"qsl_idx": 1, "data": hexed(5, 6)}], **scored)
    audit = write_logs(
        tmp_path / "audit",
        [{"qsl_idx": 1, "data": hexed(5, 7)}],
        effective_accuracy_log_rng_seed=720381539243781796,
        **scored,
    )
    v = verify.test01(accuracy, accuracy, audit, "int32")
    assert not v.passed and "a different answer = 1 (0 differ in the first element" in v.files["verify_accuracy.txt"]


def test_test06_counts_an_answer_made_of_two_eos_tokens(tmp_path: Path) -> None:
    """MLCommons' EOS loop never reads an answer's first element, so it passes ``[EOS, EOS]``; this does not."""
    answer = {"qsl_idx": 0, "data": hexed(EOS, EOS), "token_data": hexed(EOS), "token_count": 2}
    v = verify.test06(write_logs(tmp_path, [answer], effective_scenario="SingleStream"), "SingleStream", EOS)
    assert not v.passed and "EOS check pass: False" in lines(v.files["verify_accuracy.txt"])


@pytest.mark.parametrize(
    ("latency_ns", "tolerance", "note"),
    [(150_000, "20%", None), (1_000_000, "10%", "would allow 20% here"), (4_000, "10%", "relaxes only where")],
)
def test_test04_relaxes_only_where_both_readings_of_the_rule_do(
    tmp_path: Path, latency_ns: int, tolerance: str, note: str | None
) -> None:
    """The 20% is meant for short latencies; MLCommons' TEST04 script holds 1e9/latency against the bound instead."""
    ref = write_logs(tmp_path / "ref", [], effective_scenario="SingleStream", early_stopping_latency_ss=latency_ns)
    audit = write_logs(
        tmp_path / "audit",
        [],
        effective_scenario="SingleStream",
        early_stopping_latency_ss=int(latency_ns / 1.15),  # 15% faster
        effective_performance_issue_same=True,
    )
    v = verify.test04(ref, audit)
    text = v.files["verify_performance.txt"]
    assert f"the audit run may be at most {tolerance} faster" in text
    assert v.passed is (tolerance == "20%")
    assert note is None or note in text
