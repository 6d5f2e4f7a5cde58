"""Does ``accelbench kernels gemm`` lose anything to the loop a user would time by hand? Both, alternating, on one
device, in two windows each, so that a gap is the harness's and not the clocks':

- sustained, like with like: each side warms up for ``--warmup`` seconds, then times one call a sample until both
  ``--seconds`` and 10 samples are reached, with the L2 cache flushed (a buffer zeroed outside the timed region)
  before each call where the device times with events (CUDA), hot on a host clock (CPU): accelbench's default
  timing, done by hand on the bare side (plain ``a @ b``, plain events or ``perf_counter``);
- burst: ``--samples`` hot back-to-back calls after a few warm-ups, the GPU idle before (about 70 ms of an
  8192-cube GEMM), accelbench run with ``--cache hot --min-time 0 --warmup-time 0``.

A GPU at its power cap lowers its clocks within a fraction of a second, so a burst runs faster than a sustained
window on either side; comparing one side's burst with the other's sustained run measures the clocks. Each window
says the SM clock at its end and the share of it a power or thermal limit held the clocks down (NVML's violation
counters, as accelbench's records keep them), where the device has a reader.

    python bench/gemm_vs_bare.py [--size 8192] [--precision bf16] [--device cuda] [--rounds 3]

Prints each round's windows and, last, the median ratio accelbench/bare over the rounds for the sustained windows
(goal >= 0.98), and for the bursts.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
#: Warm-up calls before a bare burst; accelbench's burst (``--warmup-time 0``) makes 2 after its 5-call estimate.
BURST_WARMUP = 5
#: Samples a sustained window takes at least, on both sides (accelbench's ``--min-reps`` default).
MIN_REPS = 10
#: Idle seconds before a bare burst on a GPU, so that it starts, as accelbench's does after its process start-up,
#: from a GPU that is not at its power cap.
REST_SECONDS = 2.0


def options(argv: list[str] | None = None) -> argparse.Namespace:
    from accelbench.measure.timer import TimerConfig

    default = TimerConfig()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--precision", default="bf16", choices=tuple(DTYPES))
    p.add_argument("--device", default="cuda")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--samples", type=int, default=50, help="hot calls in a burst, on each side")
    p.add_argument(
        "--seconds", type=float, default=default.min_time, help="the sustained window's sampling time, each side"
    )
    p.add_argument("--warmup", type=float, default=default.warmup_seconds, help="the sustained window's warm-up")
    args = p.parse_args(argv)
    if min(args.size, args.rounds, args.samples) < 1:
        p.error("--size, --rounds and --samples must be at least 1")
    if args.seconds <= 0 or args.warmup < 0:
        p.error("--seconds must be positive and --warmup not negative")
    return args


@dataclass
class Window:
    """One timed window: its rate (TFLOPS of the median sample, the best sample's) and the GPU's state over it."""

    median: float
    best: float
    gpu: dict[str, Any] = field(default_factory=dict)


def describe_clocks(gpu: dict[str, Any], device_type: str, why_not: str | None = None) -> str:
    """The clock line of one window: the SM clock at its end, the share a power or thermal limit held the clocks
    down (from the violation counters over the window), the throttle reasons set at its end."""
    if device_type == "cpu":
        return "clocks: not available on cpu"
    if not gpu:
        return f"clocks: not read ({why_not or 'no reader for this device'})"
    if "error" in gpu:
        return f"clocks: not read ({gpu['error']})"
    parts = [f"SM {gpu['sm_clock_mhz']} MHz at the end" if "sm_clock_mhz" in gpu else "SM clock not read"]
    shares = gpu.get("throttled_fraction") or {}
    if shares:
        parts.append(", ".join(f"{limit}-limited {share:.0%}" for limit, share in sorted(shares.items())))
    else:
        parts.append("no throttle counters")
    if "power_w" in gpu:
        parts.append(f"{gpu['power_w']:.0f} W")
    reasons = gpu.get("throttle_reasons")
    if reasons is not None:
        parts.append(f"reasons at the end: {', '.join(reasons) or 'none'}")
    return "clocks: " + "; ".join(parts)


def accelbench_window(args: argparse.Namespace, burst: bool) -> Window:
    """accelbench's GEMM run as a user runs it (its own process), sustained (its defaults, the budget of
    ``--warmup``/``--seconds``) or as a burst; the figure and the GPU state its record kept."""
    n = str(args.size)
    timing = (
        ["--cache", "hot", "--min-time", "0", "--warmup-time", "0", "--min-reps", str(args.samples)]
        if burst
        else ["--min-time", str(args.seconds), "--warmup-time", str(args.warmup), "--min-reps", str(MIN_REPS)]
    )
    with tempfile.TemporaryDirectory() as folder:  # the figure is printed here, not kept in the user's store
        cmd = [sys.executable, "-m", "accelbench", "kernels", "gemm", "--m", n, "--n", n, "--k", n,
               "--precision", args.precision, "--device", args.device, "--json", "--db", f"{folder}/s.db",
               "--out", folder, *timing]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"accelbench kernels gemm failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    data = json.loads(done.stdout)
    record = (data.get("results") or [data])[0] if isinstance(data, dict) else data[0]
    if record.get("status") != "ok":
        why = record.get("reason") or record.get("error")
        raise SystemExit(f"accelbench kernels gemm: {record.get('status')}: {why}")
    flops = 2 * args.size**3
    rates = sorted(flops / s / 1e12 for s in record.get("samples") or [])
    median = float(record["metrics"]["tflops"]["value"])
    return Window(median, rates[-1] if rates else median, dict(record.get("conditions", {}).get("gpu") or {}))


class Bare:
    """The loop a user writes: ``a @ b`` on operands made once, timed with plain device events (or the host clock
    around a synchronisation), the L2 flushed by hand; accelbench supplies only the device and its GPU reader."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        from accelbench.devices import resolve_device
        from accelbench.devices.kind import kind_of

        self.device = resolve_device(args.device)
        self.kind = kind_of(self.device)
        dtype = getattr(torch, DTYPES[args.precision])
        self.a = torch.randn(args.size, args.size, device=self.device, dtype=dtype)
        self.b = torch.randn_like(self.a)
        self.flops = 2 * args.size**3
        self.args = args
        # events where the device has them (the module of its type: torch.cuda, torch.xpu), else the host clock
        self.events = getattr(torch, self.device.type) if self.kind.event_timing else None
        # cold where accelbench is cold (its --cache auto): the same buffer size its kind flushes with
        self.flush = self.kind.flush_buffer(self.device) if self.events is not None else None
        index = self.kind.monitored(self.device)
        self.index = index
        self.reader = self.kind.reader() if index is not None else None

    def call(self) -> object:
        return self.a @ self.b

    def sync(self) -> None:
        self.kind.synchronize(self.device)

    def _event_samples(self, reps: int, flush: Any) -> list[float]:
        assert self.events is not None
        starts = [self.events.Event(enable_timing=True) for _ in range(reps)]
        ends = [self.events.Event(enable_timing=True) for _ in range(reps)]
        self.sync()
        for i in range(reps):
            if flush is not None:
                flush.zero_()  # outside the events: the flush is not timed
            starts[i].record()
            self.call()
            ends[i].record()
        self.sync()
        return [float(s.elapsed_time(e)) / 1e3 for s, e in zip(starts, ends, strict=True)]

    def _host_sample(self) -> float:
        t0 = time.perf_counter()
        self.call()
        self.sync()
        return time.perf_counter() - t0

    def sustained(self) -> list[float]:
        """Seconds of each sample: warm-up for ``--warmup`` s (at least 2 calls), then one call a sample until
        ``--seconds`` and ``MIN_REPS`` samples are reached (the count set from a 3-call estimate where the
        device's queue runs ahead of the host), flushed before each call where the device has events."""
        args = self.args
        if self.events is None:
            t0 = time.perf_counter()
            warm = 0
            while warm < 2 or time.perf_counter() - t0 < args.warmup:
                self._host_sample()
                warm += 1
            seconds: list[float] = []
            start = time.perf_counter()
            while len(seconds) < MIN_REPS or time.perf_counter() - start < args.seconds:
                seconds.append(self._host_sample())
            return seconds
        estimate = max(statistics.median(self._event_samples(3, self.flush)), 1e-7)
        for _ in range(max(2, math.ceil(args.warmup / estimate))):
            if self.flush is not None:
                self.flush.zero_()
            self.call()
        return self._event_samples(max(MIN_REPS, math.ceil(args.seconds / estimate)), self.flush)

    def burst(self) -> list[float]:
        """Seconds of each of ``--samples`` hot calls after ``BURST_WARMUP`` warm-ups, from an idle device."""
        if self.events is not None:
            time.sleep(REST_SECONDS)
        for _ in range(BURST_WARMUP):
            self.call()
        if self.events is not None:
            return self._event_samples(self.args.samples, None)
        self.sync()
        return [self._host_sample() for _ in range(self.args.samples)]

    def window(self, timed: Callable[[], list[float]]) -> Window:
        """``timed``'s rates with the GPU state over it: the clocks at its end and the throttled shares from the
        reader's counters read at its edges (as accelbench's conditions monitor reads them)."""
        before = self.reader.throttle_counters(self.index) if self.reader and self.index is not None else {}
        t0 = time.perf_counter()
        seconds = timed()
        wall = time.perf_counter() - t0
        gpu: dict[str, Any] = {}
        if self.reader is not None and self.index is not None:
            gpu = dict(self.reader.conditions(self.index))
            shares = self.reader.throttled_shares(before, self.reader.throttle_counters(self.index), wall)
            if shares:
                gpu["throttled_fraction"] = shares
        rates = sorted(self.flops / s / 1e12 for s in seconds)
        return Window(statistics.median(rates), rates[-1], gpu)

    def why_not_read(self) -> str | None:
        if self.reader is None:
            return f"no reader for {self.kind.name} devices"
        return self.reader.unavailable()


def main() -> None:
    args = options()
    bare = Bare(args)
    device_type = bare.device.type
    why = bare.why_not_read()
    cold = bare.flush is not None
    print(
        f"gemm {args.size}^3 {args.precision} on {args.device}, accelbench beside a bare loop, alternating; "
        f"sustained: {args.warmup:g} s warm-up, then >= {args.seconds:g} s and >= {MIN_REPS} samples of one call, "
        f"{'the L2 flushed before each call (cold)' if cold else 'hot cache (host clock)'}; "
        f"burst: {args.samples} hot calls after a few warm-ups"
    )
    sustained: list[float] = []
    bursts: list[float] = []
    for i in range(args.rounds):
        got: dict[str, Window] = {}
        for side in ("accelbench", "bare") if i % 2 == 0 else ("bare", "accelbench"):
            if side == "accelbench":
                got["ab-burst"] = accelbench_window(args, burst=True)
                got["ab-sustained"] = accelbench_window(args, burst=False)
            else:
                got["bare-burst"] = bare.window(bare.burst)
                got["bare-sustained"] = bare.window(bare.sustained)
        for name, ratios in (("burst", bursts), ("sustained", sustained)):
            ours, theirs = got[f"ab-{name}"], got[f"bare-{name}"]
            ratios.append(ours.median / theirs.median)
            print(
                f"round {i + 1} {name}: accelbench {ours.median:,.4g} TFLOPS "
                f"[{describe_clocks(ours.gpu, device_type, why)}], bare median {theirs.median:,.4g} "
                f"(best {theirs.best:,.4g}) [{describe_clocks(theirs.gpu, device_type, why)}]: {ratios[-1]:.3f}x"
            )
    print(
        f"gemm {args.size}^3 {args.precision} on {args.device}: accelbench/bare-median median "
        f"{statistics.median(sustained):.3f}x sustained, like with like (goal >= 0.98); "
        f"burst (hot, {args.samples} calls) {statistics.median(bursts):.3f}x"
    )


if __name__ == "__main__":
    main()
