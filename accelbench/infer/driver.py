"""One LoadGen test of what :class:`~accelbench.infer.serving.Serving` serves, through the batching SUT."""

from __future__ import annotations

from typing import Any, Callable

from accelbench.infer.serving import Serving
from accelbench.infer.sut import BatchingSUT
from accelbench.kit.context import RunContext
from accelbench.loadgen.library import SampleLibrary
from accelbench.loadgen.params import LoadGenParams
from accelbench.loadgen.start import Outcome, start_test


def loadgen_run(
    serving: Serving,
    settings: Any,
    params: LoadGenParams,
    ctx: RunContext,
    answers: Callable[[list[int], Any], list[Any]] | None = None,
) -> Outcome:
    """One LoadGen test: its own log folder, an explicit (absent) audit config, the SUT stopped whatever happens.

    ``answers`` (accuracy mode) turns a batch's outputs into the answers LoadGen logs, given the samples' indices.
    """
    qsl_lib = SampleLibrary(serving.make_input, serving.total)
    max_wait = params.max_wait_ms / 1000 if params.scenario == "server" else 0.0
    sut_impl = BatchingSUT(serving.workers, qsl_lib, params.batch_size, max_wait, serving.collate, answers)
    devices = [w.device for w in serving.workers]
    detail, conditions, outdir = start_test(sut_impl, qsl_lib, settings, params, ctx, serving.threads, devices)
    return Outcome(detail, conditions, outdir, sut_impl)
