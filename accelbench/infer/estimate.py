"""How long an image model's LoadGen entry takes: the build, the calibration probe (:func:`accelbench.infer.settings
.probe`), then what LoadGen's own plan for the profile lasts at the modelled rate (never under its minimum
duration)."""

from __future__ import annotations

import math

from accelbench.infer import settings as lg
from accelbench.infer.specs import InferParams
from accelbench.kit.estimate import Target, summed
from accelbench.loadgen import search
from accelbench.loadgen import settings as lgset
from accelbench.loadgen.params import QSL_SAMPLES
from accelbench.workloads.flops import vision_flops

#: SingleStream's queries in the quick profile (:func:`accelbench.loadgen.settings.base`'s minimum query count)
QUICK_SINGLESTREAM_QUERIES = 64


def loadgen(p: InferParams, target: Target) -> tuple[float, str]:
    """``infer/loadgen``: the probe's calls, then the accuracy pass, find-peak's trials or the scenario's run."""
    costs = target.costs
    flops = vision_flops(p.model, p.scale, False)
    peak = target.flops(p.effective_precision)
    batch_seconds = max(
        costs.step_floor, flops * p.batch_size / (peak * costs.vision_efficiency) if flops and peak else 0.0
    )
    single = max(costs.step_floor, flops / (peak * costs.vision_efficiency) if flops and peak else 0.0)
    rate = p.batch_size / batch_seconds
    warm = lg.PROBE_WARM_CALLS * (batch_seconds + single)
    probe = warm + _probed(batch_seconds, lg.PROBE_BATCHES) + _probed(single, lg.PROBE_SINGLES)
    duration = p.min_duration
    if p.mode == "accuracy":
        run, what = QSL_SAMPLES[p.profile] / rate, "accuracy pass"
    elif p.mode == "find-peak":
        trials = math.ceil(math.log2(1 / search.PRECISION)) + search.CONFIRMATIONS
        run, what = trials * (duration + search.TRIAL_OVERHEAD), f"{trials} trials"
    else:
        run, what = _run(p, rate, single, duration), f"{p.scenario} run"
    return summed([("build", costs.model_build), ("probe", probe), (what, run)])


def _probed(call: float, most: int) -> float:
    """:func:`accelbench.infer.settings.median_seconds`'s length: until ``PROBE_SECONDS`` and ``PROBE_MIN_CALLS``."""
    return min(most * call, max(lg.PROBE_SECONDS, lg.PROBE_MIN_CALLS * call))


def _run(p: InferParams, rate: float, single: float, duration: float) -> float:
    """What LoadGen's plan lasts at ``rate`` (:mod:`accelbench.infer.settings`): the profile's minimum duration,
    or longer where its minimum query count at the planned rate says so."""
    quick = p.profile == "quick"
    if p.scenario == "offline":
        return lgset.loadgen_offline_size(rate * lgset.OFFLINE_HEADROOM, int(duration * 1000), 1) / rate
    if p.scenario == "server":
        return max(duration, lgset.QUICK_TAIL_QUERIES / lg.server_qps(p, rate) if quick else 0.0)
    if p.scenario == "singlestream":
        return max(duration, QUICK_SINGLESTREAM_QUERIES * single if quick else 0.0)
    return max(duration, lgset.QUICK_TAIL_QUERIES * p.samples_per_query / rate if quick else 0.0)
