import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from accelbench.errors import UsageError
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.timer import Timer, TimerConfig


class FakeClock:
    """A nanosecond clock that only the timed function moves: each call costs ``cost`` seconds."""

    def __init__(self, cost: float) -> None:
        self.now = 0
        self.cost_ns = int(cost * 1e9)
        self.calls = 0

    def __call__(self) -> int:
        return self.now

    def work(self) -> None:
        self.calls += 1
        self.now += self.cost_ns


def _fake(cost: float, **config) -> tuple[FakeClock, object]:
    clock = FakeClock(cost)
    return clock, Timer(clock.work, "cpu", TimerConfig(**config), clock=clock).measure()


def test_each_call_is_one_sample_of_its_cost():
    clock, m = _fake(0.002, warmup_seconds=0.0, min_reps=5, min_time=0.05, max_time=1.0)
    assert m.calls_per_sample == 1 and m.clock == "perf_counter_ns"
    assert m.median == pytest.approx(0.002) and m.n == 25  # min_time 0.05 s at 2 ms a call
    assert m.total_seconds == pytest.approx(clock.now / 1e9)


def test_max_time_wins_over_min_reps():
    _, m = _fake(0.01, warmup_seconds=0.0, min_reps=1000, min_time=0.1, max_time=0.2)
    assert m.n == 20  # stopped by max_time, min_reps unmet


def test_min_reps_and_min_time_must_both_be_met():
    _, counted = _fake(1e-3, warmup_seconds=0.0, min_reps=30, min_time=0.0, max_time=5.0)
    assert counted.n == 30
    _, timed = _fake(0.01, warmup_seconds=0.0, min_reps=1, min_time=0.2, max_time=5.0)
    assert timed.n == 20


def test_warmup_runs_for_its_seconds_before_sampling():
    clock, m = _fake(0.01, warmup_seconds=0.1, min_warmup_calls=2, min_reps=3, min_time=0.0, max_time=1.0)
    assert m.warmup_calls == 10 and clock.calls == 13


def test_tiny_calls_are_grouped_per_sample():
    _, m = _fake(1e-6, warmup_seconds=0.001, min_reps=5, min_time=0.0, max_time=1.0)
    assert 20 <= m.calls_per_sample <= 21  # 20 us per sample at 1 us a call (ceil of a float ratio)
    assert m.median == pytest.approx(1e-6)


def test_a_real_sleep_is_timed_within_bounds():
    """The default clock: one real check that the seam did not disconnect it."""
    m = Timer(lambda: time.sleep(0.002), "cpu", TimerConfig(warmup_seconds=0.0, min_reps=3, min_time=0.0)).measure()
    assert m.n >= 3 and m.median >= 0.002


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(min_reps=0),
        dict(min_time=2.0, max_time=1.0),
        dict(max_time=0),
        dict(cache="lukewarm"),
        dict(warmup_seconds=-1),
    ],
)
def test_bad_budgets_are_refused(kwargs):
    with pytest.raises(ValueError):
        TimerConfig(**kwargs)


@pytest.mark.parametrize(
    "params, flag",
    [
        ({"min_reps": 0}, "--min-reps"),
        ({"min_time": 2.0, "max_time": 1.0}, "--max-time"),
        ({"warmup_time": -1}, "--warmup-time"),
    ],
)
def test_bad_budgets_on_the_command_line_name_the_flag(params, flag):
    from accelbench.suite.suites import make_entry

    with pytest.raises(UsageError, match=flag):
        make_entry("kernels/gemm", params)


def test_gemm_agrees_with_torch_utils_benchmark():
    """The harness reports what an independent timer measures for the same matmul (within 10%)."""
    from torch.utils.benchmark import Timer as TorchTimer

    torch.set_num_threads(2)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    c = torch.empty(512, 512)
    fn = lambda: torch.mm(a, b, out=c)  # noqa: E731
    cfg = TimerConfig(min_time=0.5, max_time=3.0, min_reps=10)
    ours, theirs = [], []
    for _ in range(5):  # interleaved, so both see the same neighbours; noise only adds time: compare bests
        ours.append(Timer(fn, "cpu", cfg).measure().median)
        ref = TorchTimer("torch.mm(a, b, out=c)", globals={"torch": torch, "a": a, "b": b, "c": c}, num_threads=2)
        theirs.append(ref.blocked_autorange(min_run_time=0.5).median)
        if _agree(ours, theirs):
            break
    assert _agree(ours, theirs), (ours, theirs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA event timing and L2 flush need an NVIDIA GPU")
def test_cuda_events_cold_and_hot():
    a = torch.randn(2048, 2048, device="cuda")
    for cache in ("cold", "hot"):
        m = Timer(lambda: a @ a, "cuda", TimerConfig(cache=cache, min_time=0.1)).measure()
        assert m.clock == "cuda_event" and m.meta["cache"] == cache and m.median > 0


def test_contention_from_another_process_is_recorded():
    # the burner must be outside this process's tree (a child would be accelbench's own): started by a
    # process that exits at once, so it is orphaned
    start = (
        "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', sys.argv[1]], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    )
    burn = "import time\nt=time.time()\nwhile time.time()-t<5: pass"
    pid = int(subprocess.run([sys.executable, "-c", start, burn], capture_output=True, text=True, check=True).stdout)
    try:
        time.sleep(0.3)
        with ConditionsMonitor(threads=1) as mon:
            time.sleep(1.0)
    finally:
        os.kill(pid, signal.SIGKILL)
    c = mon.conditions
    assert c.other_cpu_fraction > 0.2
    assert c.contended and any("other processes" in w for w in c.warnings)
    d = c.to_dict()
    assert {"steal_fraction", "other_cpu_fraction", "threads", "contended"} <= set(d)


def test_own_cpu_use_is_not_contention(monkeypatch):
    """Counters as /proc/stat would give them: the machine was busy exactly as long as we were."""
    from accelbench.measure import conditions

    busy = iter([(100.0, 0.0, 400.0), (101.8, 0.0, 402.0)])
    own = iter([5.0, 6.8])
    monkeypatch.setattr(conditions, "_system_busy_and_steal", lambda: next(busy))
    monkeypatch.setattr(conditions, "_own_cpu_seconds", lambda: next(own))
    with ConditionsMonitor(threads=2) as mon:
        pass
    assert mon.conditions.other_cpu_fraction == 0.0 and not mon.conditions.contended


def _agree(ours: list[float], theirs: list[float], tol: float = 0.10) -> bool:
    """One interleaved round within ``tol``, or the two timers' best figures within ``tol``."""
    same_round = any(abs(a / b - 1) < tol for a, b in zip(ours, theirs, strict=True))
    return same_round or abs(min(ours) / min(theirs) - 1) < tol
