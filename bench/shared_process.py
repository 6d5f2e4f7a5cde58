"""What sharing a worker process saves a suite of kernels, and whether it changes what they measure: the same suite
of small GEMM entries run with each entry in its own process and with consecutive entries sharing one, alternating,
on this machine and device.

    python bench/shared_process.py [--entries 6] [--rounds 2] [--device cuda] [--tolerance 0.10]

Sharing is only worth its saving if each entry still measures what it measures alone: a setting one entry leaves
behind (threads, memory, a failed device context) would show as a figure that moves. So each entry's figure
(TFLOPS, the median over the rounds) is compared between the two ways, and the worst entry's difference is printed
against ``--tolerance`` (exit status 1 beyond it, or when an entry fails). Also printed: each round's wall seconds,
the median ratio isolated/shared (above 1: sharing saves that much) and how long the whole run took. On a GPU the
saving is each entry's device context start-up; on a CPU, the fork and the first call's set-up.

The defaults fit the device check's ``shared`` step (``bench/gpu_check.sh``): on a GPU an isolated entry costs a
process start and a CUDA context, about 3 s, so 6 entries and 2 rounds take about 50 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from accelbench import registry
from accelbench.results.store import Store
from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, make_entry
from accelbench.system.profile import collect_profile

#: Each entry's figure: the GEMM's rate, the metric a kernel entry is judged by.
METRIC = "tflops"


def suite(n: int, device: str) -> Suite:
    quick = {"min_time": 0.05, "max_time": 0.2, "min_reps": 3, "precision": "fp32", "device": device}
    sizes = [256 + 32 * i for i in range(n)]
    return Suite("bench", [make_entry("kernels/gemm", quick | {"m": s, "n": s, "k": s}) for s in sizes])


def timed(s: Suite, shared: bool, folder: Path, profile: dict[str, Any]) -> tuple[float, dict[int, float]]:
    """Wall seconds of the suite run one way, and each entry's figure (by its size)."""
    info = registry.BENCHMARKS["kernels/gemm"]
    registry.BENCHMARKS["kernels/gemm"] = dataclasses.replace(info, shares_process=shared)
    try:
        with Store(folder / f"{time.monotonic_ns()}.db") as store:
            t0 = time.perf_counter()
            summary = run_suite(s, store, RunOptions(out_dir=folder / "runs"), profile=profile)
            seconds = time.perf_counter() - t0
    finally:
        registry.BENCHMARKS["kernels/gemm"] = info
    failed = [
        f"{r.params.get('m')}^3: {r.status} {r.error or r.reason or ''}" for r in summary.results if r.status != "ok"
    ]
    if failed or len(summary.results) != len(s.entries):
        way = "shared" if shared else "isolated"
        raise SystemExit(f"{way}: {len(failed)} of {len(s.entries)} entries did not measure: {'; '.join(failed)[:400]}")
    return seconds, {int(r.params["m"]): r.metrics[METRIC].value for r in summary.results}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The entry whose figure moved most between the two ways, and whether that is within the tolerance."""

    size: int
    isolated: float
    shared: float
    tolerance: float

    @property
    def difference(self) -> float:
        """Shared relative to isolated: -0.12 is 12% slower when sharing."""
        return self.shared / self.isolated - 1.0

    @property
    def within(self) -> bool:
        return abs(self.difference) <= self.tolerance

    def line(self) -> str:
        where = "within" if self.within else "beyond"
        return (
            f"figures: worst entry {self.size}^3: isolated {self.isolated:,.4g}, shared {self.shared:,.4g} "
            f"{METRIC.upper()} ({self.difference:+.1%}), {where} the {self.tolerance:.0%} tolerance"
        )


def compare(isolated: dict[int, list[float]], shared: dict[int, list[float]], tolerance: float) -> Verdict:
    """Each entry's median figure over the rounds, shared against isolated; the entry that differs most."""
    worst: Verdict | None = None
    for size in sorted(isolated):
        v = Verdict(size, statistics.median(isolated[size]), statistics.median(shared[size]), tolerance)
        if worst is None or abs(v.difference) > abs(worst.difference):
            worst = v
    if worst is None:
        raise ValueError("no entries to compare")
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entries", type=int, default=6)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--tolerance", type=float, default=0.10, help="the largest difference of an entry's figure")
    args = p.parse_args()
    if args.entries < 1 or args.rounds < 1:
        p.error("--entries and --rounds must be at least 1")
    if not 0 < args.tolerance < 1:
        p.error("--tolerance is a fraction between 0 and 1 (0.10: 10%)")
    begun = time.perf_counter()
    s = suite(args.entries, args.device)
    profile = collect_profile()
    ratios: list[float] = []
    figures: dict[bool, dict[int, list[float]]] = {False: {}, True: {}}
    with tempfile.TemporaryDirectory() as name:
        for i in range(args.rounds):
            order = (False, True) if i % 2 == 0 else (True, False)
            got: dict[bool, float] = {}
            for shared in order:
                got[shared], per_entry = timed(s, shared, Path(name), profile)
                for size, value in per_entry.items():
                    figures[shared].setdefault(size, []).append(value)
            ratios.append(got[False] / got[True])
            print(f"round {i + 1}: isolated {got[False]:.1f} s, shared {got[True]:.1f} s ({ratios[-1]:.2f}x)")
    verdict = compare(figures[False], figures[True], args.tolerance)
    print(
        f"figures ({METRIC.upper()}, median over {args.rounds} round(s), isolated -> shared): "
        + ", ".join(
            f"{size}: {statistics.median(figures[False][size]):,.4g} -> {statistics.median(figures[True][size]):,.4g}"
            for size in sorted(figures[False])
        )
    )
    print(verdict.line())
    print(
        f"{args.entries} gemm entries on {args.device}: isolated/shared median {statistics.median(ratios):.2f}x; "
        f"took {time.perf_counter() - begun:.0f} s"
    )
    if not verdict.within:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
