"""One LoadGen test of any SUT: its own log folder, an explicit audit config (a compliance test's, or none), the
SUT stopped whatever happens, under the conditions monitor and the heartbeat."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Sequence

from accelbench.devices.kind import monitored_indices
from accelbench.kit.context import RunContext
from accelbench.loadgen.audit import config_path
from accelbench.loadgen.heartbeat import heartbeat
from accelbench.loadgen.library import SampleLibrary
from accelbench.loadgen.logs import drop_empty_trace, read_detail
from accelbench.loadgen.params import QSL_SAMPLES, LoadGenParams
from accelbench.loadgen.settings import planned_samples
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.heap import frozen_heap


@dataclass
class Outcome:
    """One LoadGen test: its detail log, the conditions it ran in, its log folder and the SUT (a batching one, or
    a language model's token SUT)."""

    detail: dict[str, Any]
    conditions: dict[str, Any]
    outdir: Any
    sut: Any
    #: why the run does not measure the system although LoadGen called it VALID (far under its probe in every
    #: rerun), or None
    disturbed: str | None = None


def start_test(
    sut_impl: Any,
    qsl_lib: SampleLibrary[Any],
    settings: Any,
    params: LoadGenParams,
    ctx: RunContext,
    threads: int,
    devices: list[Any],
    sut_pids: Sequence[int] = (),
) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """One LoadGen test of any SUT (``issue``, ``flush``, ``stop``, ``error``): its own log folder, an explicit
    (absent) audit config, the SUT stopped whatever happens; LoadGen's detail log, the conditions, the folder.
    ``sut_pids``: processes on this machine that are the system under test (a local server the SUT is a client
    of), whose CPU the conditions count as the work, not as contention."""
    import mlperf_loadgen as lg

    what = f"{params.mode}-{params.audit}" if params.audit else params.mode
    outdir = ctx.log_dir / f"loadgen-{params.scenario}-{what}-{uuid.uuid4().hex[:8]}"
    outdir.mkdir(parents=True)
    audit_config = config_path(outdir, params.audit, params.model, params.scenario)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.log_output.copy_summary_to_stdout = False
    # the trace (mlperf_log_trace.json) is hundreds of MB on a fast run and no verdict reads it: only on request
    log_settings.enable_trace = params.loadgen_trace
    sut = lg.ConstructSUT(sut_impl.issue, sut_impl.flush)
    in_memory = min(qsl_lib.total, QSL_SAMPLES[params.profile])
    qsl = lg.ConstructQSL(qsl_lib.total, in_memory, qsl_lib.load, qsl_lib.unload)
    planned = planned_samples(settings, params.scenario, qsl_lib.total if params.mode == "accuracy" else None)
    try:
        with (
            frozen_heap(),  # the SUT's callbacks are Python: a full collection of the worker's heap would stall them
            ConditionsMonitor(threads, gpus=monitored_indices(devices), sut_pids=sut_pids) as monitor,
            heartbeat(ctx.progress, lambda: sut_impl.samples, planned),
        ):
            # an explicit audit-config path: the compliance test's, or one that does not exist
            lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, str(audit_config))
    finally:
        sut_impl.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
        drop_empty_trace(outdir)
    if sut_impl.error is not None:
        raise sut_impl.error
    return read_detail(outdir / "mlperf_log_detail.txt"), monitor.conditions.to_dict(), outdir
