"""Is accelbench's system under test the bottleneck of a LoadGen run?

In one process: LoadGen's Offline scenario against a minimal inline SUT (which
completes each query inside the issue callback), then against accelbench's
batching SUT with the null backend; and accelbench's Server scenario at a
ladder of target QPS, reporting the highest VALID. Targets: at least 0.8x the
inline SUT's Offline samples/s, and VALID Server runs at 20k QPS.

    python bench/loadgen_overhead.py [--duration 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import mlperf_loadgen as lg

from accelbench.loadgen.logs import read_detail
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline


def inline_offline(duration: float, outdir: Path, expected_qps: float) -> float:
    def issue(samples: list) -> None:
        lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in samples])

    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(64, 64, lambda s: None, lambda s: None)
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.PerformanceOnly
    settings.offline_expected_qps = expected_qps  # the same plan as accelbench's run: same number of samples
    settings.min_duration_ms = int(duration * 1000)
    settings.min_query_count = 1
    log = lg.LogSettings()
    log.log_output.outdir = str(outdir)
    log.log_output.copy_summary_to_stdout = False
    lg.StartTestWithLogSettings(sut, qsl, settings, log, str(outdir / "no-audit.config"))
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    return float(read_detail(outdir / "mlperf_log_detail.txt")["result_samples_per_second"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=3, help="alternating Offline rounds; medians are compared")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        null = {"backend": "null", "batch_size": 64, "duration": args.duration}
        inline_rates, our_rates = [], []
        for i in range(args.rounds):
            [ours] = run_inline(make_entry("infer/loadgen", {"scenario": "offline", **null}), base)
            our_rates.append(ours.metrics["throughput"].value)
            planned = float(
                read_detail(Path(ours.details["loadgen_log_dir"]) / "mlperf_log_detail.txt")[
                    "requested_offline_expected_qps"
                ]
            )
            (base / f"inline{i}").mkdir()
            inline_rates.append(inline_offline(args.duration, base / f"inline{i}", planned))
        inline, rate = statistics.median(inline_rates), statistics.median(our_rates)
        print(f"Offline (median of {args.rounds}): inline SUT {inline:,.0f} samples/s, accelbench null backend "
              f"{rate:,.0f} samples/s ({rate / inline:.2f}x; target >= 0.8x)")  # fmt: skip
        best = 0.0
        for qps in (5_000, 10_000, 20_000, 30_000, 40_000):
            entry = make_entry("infer/loadgen", {"scenario": "server", "target_qps": qps, **null})
            [r] = run_inline(entry, base)
            print(f"Server at {qps:,} QPS: {'VALID' if r.valid else 'INVALID'}")
            if r.valid:
                best = qps
        print(f"highest VALID Server target: {best:,.0f} QPS (target >= 20,000)")


if __name__ == "__main__":
    main()
