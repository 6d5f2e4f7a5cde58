"""Records built by hand, for tests of the store, export and compare."""

from __future__ import annotations

from accelbench.results.record import Metric, Result


def make_result(
    run_id: str = "run-a",
    value: float = 1.0,
    ci: tuple[float, float] | None = (0.95, 1.05),
    params: dict | None = None,
    tags: dict | None = None,
    status: str = "ok",
    started_at: str = "2026-01-01T00:00:00.000+00:00",
) -> Result:
    r = Result(
        benchmark="kernels/gemm",
        params=params or {"m": 64, "n": 64, "k": 64, "batch": 1, "precision": "fp32", "device": "cpu", "threads": 2},
        status=status,  # type: ignore[arg-type]
        run_id=run_id,
        tags=tags or {},
        system={"fingerprint": "abc", "profile": {"cpu": {"model": "test cpu"}, "accelerators": []}},
        started_at=started_at,
        ended_at=started_at,
    )
    if status == "ok":
        r.metrics = {"tflops": Metric(value=value, unit="TFLOPS", higher_is_better=True, ci95=ci, n=10)}
        r.primary_metric = "tflops"
    elif status == "failed":
        r.error = "boom"
    else:
        r.reason = "not supported"
    return r
