"""Language-model serving runs priced, metered and compared: USD per 1M output and input tokens and J per output
token by the one path every record's figures take, and ``compare`` that judges two token runs only as like with
like (the limits they were held to, the lengths they served), on output tokens/s, with TTFT/TPOT beside it.

The records are real runs (tests/data/tokens_runs.json, see its 'about'); where a test needs what this shared
VM could not give (a quiet machine, a third repeat, a metered window) it says so and changes only that.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from accelbench import families
from accelbench.cli.main import main
from accelbench.cost import figures
from accelbench.cost.price import Price
from accelbench.registry import default_params, describe_params
from accelbench.results import compare as comparing
from accelbench.results.judge import unlike as judge_unlike
from accelbench.results.record import Result, new_id
from accelbench.results.store import RunInfo, Store


def unlike(b: Result, c: Result) -> list[str]:
    return judge_unlike(b, c, families.unlike)


def compare(baseline: list[Result], candidate: list[Result], **options: Any) -> comparing.Comparison:
    """As the CLI compares: a record made before a setting existed is paired as having the registry's default."""
    return comparing.compare(baseline, candidate, defaults=default_params, rules=families.unlike, **options)


DATA = Path(__file__).parent / "data" / "tokens_runs.json"
BASIS = ("throughput", "queries_per_second", "tokens_per_second")


def runs() -> dict[str, Result]:
    return {name: Result.from_dict(d) for name, d in json.loads(DATA.read_text())["records"].items()}


def quiet(r: Result) -> Result:
    """The record as if no other process had run beside it (this VM was shared): its contention warning dropped."""
    q = Result.from_dict(copy.deepcopy(r.to_dict()))
    q.set_concerns(c for c in q.concerns if c.kind != "contended")
    q.conditions["concerns"] = [c for c in q.conditions.get("concerns", []) if c["kind"] != "contended"]
    q.conditions["warnings"] = [c["text"] for c in q.conditions["concerns"]]
    return q


def repeat(r: Result, factor: float, i: int) -> Result:
    """Another run of ``r``: its figures scaled by ``factor`` (run-to-run variation), a later start."""
    c = quiet(r)
    c.id = new_id()
    c.started_at = c.ended_at = f"{r.started_at[:17]}{10 + i:02d}.000+00:00"
    for m in c.metrics.values():
        m.value *= factor if m.higher_is_better else 1 / factor
    return c


def test_a_token_run_is_priced_per_million_output_and_input_tokens_and_says_how() -> None:
    r = runs()["server"]
    price = Price.from_dict(r.system["price"])
    out = figures.priced(r, BASIS, price)
    tps = r.metrics["tokens_per_second"].value
    usd = out["usd_per_million"]
    assert usd.value == pytest.approx(2.5 / 3600 / tps * 1e6) and usd.unit == "USD per 1M output tokens"
    assert not usd.higher_is_better
    inputs = tps * r.details["input_tokens"] / r.details["output_tokens"]  # the run's own counts
    per_input = out["usd_per_million_input_tokens"]
    assert per_input.value == pytest.approx(2.5 / 3600 / inputs * 1e6) and per_input.unit == "USD per 1M input tokens"
    assert out["per_usd_hour"].unit == "output tokens/s per USD/h"  # what compare's per-$ column reads
    how = r.details["derived"]
    assert how["usd_per_million"] == (
        "the price (2.5 USD/h, system.price) / 3600 / tokens_per_second (output tokens/s) x 1e6"
    )
    assert "76,273 input / 5,296 output tokens" in how["usd_per_million_input_tokens"]
    assert "not a split of it between prefill and decode" in how["usd_per_million_input_tokens"]
    # a samples/s record takes the same path and gains no input-token figure
    images = Result("train/throughput", {}, metrics={"throughput": copy.deepcopy(r.metrics["tokens_per_second"])})
    images.metrics["throughput"].unit = "images/s"
    assert set(figures.priced(images, BASIS, price)) == {"per_usd_hour", "per_usd", "usd_per_million"}


def test_a_metered_token_run_gives_joules_per_output_token() -> None:
    r = runs()["offline"]
    # this VM reads no energy counter: a 4.06 s window at 40 W, as a package counter would have read it
    r.conditions["energy"] = {"joules": 162.3, "seconds": 4.0575, "domains": {"package-0": {"joules": 162.3}}}
    out = figures.energy(r, BASIS)
    tps = r.metrics["tokens_per_second"].value
    j = out["joules_per_output_token"]
    assert j.value == pytest.approx(162.3 / 4.0575 / tps) and j.unit == "J per output token" and not j.higher_is_better
    assert out["work_per_joule"].unit == "output tokens/J" and "joules_per_sample" not in out
    assert r.details["derived"]["joules_per_output_token"] == "average_watts / tokens_per_second (output tokens/s)"
    assert "package-0" in r.details["derived"]["average_watts"]
    r.conditions["energy"] = {"joules": None, "seconds": 4.0}  # nothing measured: no figure, never a TDP
    assert figures.energy(r, BASIS) == {}


def test_two_token_runs_pair_on_output_tokens_per_second_with_ttft_and_tpot_beside() -> None:
    rec = runs()
    base, cand = rec["server"], rec["server_again"]
    [row] = compare([base], [cand], describe=describe_params).rows
    assert row.metric == "tokens_per_second" and row.unit == "output tokens/s" and row.higher_is_better
    assert not row.judged and row.brief == (
        "not judged: unlike loads; baseline INVALID, contended, no interval; candidate INVALID, contended, no interval"
    )
    # each run sent the load its own probe chose: their throughputs are those loads, not two capacities
    assert row.unlike[0].startswith("unlike loads: Server at 19.95 vs 8.197 queries/s, each chosen from its own")
    assert "INVALID: TTFT constraint not met (LoadGen): p99 TTFT 1.151e+04 ms over the 2000 ms limit" in row.verdict
    # latencies are lower-is-better: the candidate's lower TPOT p99 reads as better (> 1)
    ttft_b, ttft_c = row.beside["TTFT p99"]
    assert not ttft_b.higher_is_better and row.beside_speedup("TTFT p99") == pytest.approx(ttft_b.value / ttft_c.value)
    assert row.beside_speedup("TPOT p99") == pytest.approx(368.386029 / 278.2627)
    assert set(row.to_dict()["beside"]) == {"TTFT p99", "TPOT p99", "tokens/s per user"}
    [tpot] = compare([base], [cand], metric="tpot_p99_ms").rows
    assert tpot.speedup == pytest.approx(368.386029 / 278.2627) and "TPOT p99" not in tpot.beside


def test_other_limits_or_other_lengths_set_a_pair_aside_with_the_reason() -> None:
    rec = {k: quiet(v) for k, v in runs().items()}
    # --ignore scenario pairs a Server run with an interactive one: other limits, so no verdict
    [row] = compare([rec["server"]], [rec["interactive"]], ignore=["scenario"], describe=describe_params).rows
    assert row.unlike[0] == "unlike limits: p99 TTFT/TPOT 2,000/100 ms vs p99 TTFT/TPOT 500/30 ms"
    assert row.brief.startswith("not judged: unlike limits; ")
    assert row.workload.endswith("(scenario server -> interactive)")
    # the same scenario with limits of the user's own (--ttft-ms/--tpot-ms), paired by --ignore
    c = compare([rec["server"]], [rec["server_tight"]], ignore=["ttft_ms", "tpot_ms"])
    [row] = c.rows
    assert row.unlike[0] == "unlike limits: p99 TTFT/TPOT 2,000/100 ms vs p99 TTFT/TPOT 5/0.5 ms"
    assert c.set_aside()["unlike limits"] == 1 and c.reasons()[0].endswith(row.unlike[0])
    # Offline at 8 and at 16 output tokens a request: other work, whatever --ignore says
    [row] = compare([rec["offline"]], [rec["offline_16_tokens"]], ignore=["output_tokens"]).rows
    assert row.unlike[0].startswith("unlike lengths: ") and "/8 vs " in row.unlike[0] and row.unlike[0].count("/16 ")
    assert "(output_tokens 8 -> 16)" in row.workload and not row.judged
    # two runs of one workload are like with like (Offline holds no limits)
    assert unlike(rec["offline"], rec["offline_threads1"]) == []
    # Server runs held to one load the user set (--target-qps), or searched for their peak, measured one thing
    held = copy.deepcopy(rec["server_qps5"])
    assert unlike(rec["server_qps5"], held) == []
    peak_a, peak_b = quiet(rec["server"]), quiet(rec["server_again"])
    peak_a.params["mode"] = peak_b.params["mode"] = "find-peak"
    assert unlike(peak_a, peak_b) == []


def test_three_runs_a_side_judge_what_one_loadgen_figure_a_run_cannot() -> None:
    rec = runs()
    t2, t1 = rec["offline"], rec["offline_threads1"]  # the same workload on 2 threads and on 1
    [one] = compare([quiet(t2)], [quiet(t1)]).rows
    assert one.verdict == "not judged: baseline no interval and candidate no interval"
    assert one.workload.endswith("(threads 2 -> 1)")
    base = [repeat(t2, f, i) for i, f in enumerate((1.0, 1.02, 0.99))]
    cand = [repeat(t1, f, i) for i, f in enumerate((1.0, 0.98, 1.01))]
    [row] = compare(base, cand).rows
    assert row.judged and row.verdict == "faster" and row.baseline_runs == 3 and row.candidate_runs == 3
    # what 3+3 separated runs weigh is said: a chance of 1 in 10 alone, hence the spread rule beside it
    assert row.judgement.evidence.startswith(
        "the 3+3 runs' figures apart (no interval within a run; rank test on the runs alone p=0.1); run-to-run spread"
    )
    assert row.speedup == pytest.approx(t1.metrics["tokens_per_second"].value / t2.metrics["tokens_per_second"].value)
    # two runs a side are not enough to judge on the runs alone
    [two] = compare(base[:2], cand[:2]).rows
    assert not two.judged and two.brief == "not judged: baseline no interval; candidate no interval"


def test_compare_prints_token_runs_with_their_reasons(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # the table's width, whatever terminal (or none) runs the tests
    rec = runs()
    base, cand = quiet(rec["server"]), quiet(rec["interactive"])
    base.run_id, cand.run_id = "20261124-000001-aaaa", "20261124-000002-bbbb"
    with Store(tmp_path / "s.db") as store:
        for r in (base, cand):
            store.add_run(RunInfo(r.run_id, r.started_at, "fixture", {}, r.fingerprint, {}))
        store.add_many([base, cand])
    argv = ["compare", base.run_id, cand.run_id, "--ignore", "scenario", "--db", str(tmp_path / "s.db")]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    [row] = d["rows"]
    assert row["metric"] == "tokens_per_second" and row["unlike"][0].startswith("unlike limits")
    assert row["beside"]["TTFT p99"]["baseline"]["unit"] == "ms" and d["set_aside"]["unlike limits"] == 1
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1 unlike limits" in out and "1 INVALID" in out
    from accelbench.results import format as fmt

    # beside the rate, each side's TTFT p99 (the column's header wraps across the table's header lines)
    assert "TTFT" in out and all(fmt.metric(r.metrics["ttft_p99_ms"]) in out for r in (base, cand))
    assert "unlike limits: p99 TTFT/TPOT 2,000/100 ms vs p99 TTFT/TPOT 500/30 ms" in out


def test_pooled_repeats_that_each_chose_their_load_are_unlike_whatever_the_latest_pair_says() -> None:
    """Three Server repeats a side are pooled: the latest pair alone sent like loads (within 5%), but the
    baseline's earlier repeats were sent others, so the pooled figures are of other loads and nothing is judged."""
    server = quiet(runs()["server"])
    assert server.details["target_qps"] and not server.params.get("target_qps")

    def sent(r: Result, qps: float, i: int) -> Result:
        c = repeat(r, qps / r.details["target_qps"], i)
        c.details["target_qps"] = qps
        return c

    base = [sent(server, q, i) for i, q in enumerate((6.3, 8.6, 13.1))]
    cand = [sent(server, q, 3 + i) for i, q in enumerate((13.0, 13.2, 13.3))]
    assert unlike(base[-1], cand[-1]) == []  # the latest pair alone looks like with like
    c = compare(base, cand)
    [row] = c.rows
    assert not row.judged and row.unlike[0].startswith("unlike loads: Server at 6.3 vs 8.6 queries/s")
    assert row.unlike[0].endswith("(among the baseline's runs)") and c.geometric_mean() is None
    # sent like loads on both sides, the same runs are like with like (this record is INVALID: set aside for that)
    like = compare([sent(server, 13.1, 7), sent(server, 13.0, 8)], cand)
    assert like.rows[0].unlike == () and "unlike" not in like.rows[0].brief
