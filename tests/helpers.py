"""Records built by hand, for tests of the store, export and compare; and a check of a record's details against the
TypedDict its writer builds."""

from __future__ import annotations

import types
import typing
from typing import Any

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


def _written_types() -> dict[str, Any]:
    """Each benchmark's family -> the TypedDict its writer builds (``Result.details`` is typed as their base)."""
    from accelbench.infer.results import ImageDetails
    from accelbench.kernels.common import KernelDetails
    from accelbench.serve.details import ServingDetails
    from accelbench.train.specs import TrainDetails
    from accelbench.tta.run import TtaDetails
    from accelbench.tune.outcome import TuneDetails

    return {
        "infer/llm": ServingDetails,
        "infer/loadgen": ImageDetails,
        "kernels": KernelDetails,
        "train": TrainDetails,
        "tta": TtaDetails,
        "tune": TuneDetails,
    }


def _engine_types() -> dict[str, Any]:
    """Each built-in engine's name -> the TypedDict of its facts (the type its class declares for ``facts``)."""
    from accelbench.serve.engines.base import ENGINES, engine_class

    return {name: typing.get_type_hints(engine_class(name))["facts"] for name in ENGINES}


def _prompt_types() -> dict[str, Any]:
    """Each prompt source's name -> the TypedDict of what it records of its prompts (``details.prompts``)."""
    from accelbench.serve.sources.conversations import ConversationPrompts
    from accelbench.serve.sources.mlperf_data import MlperfPrompts
    from accelbench.serve.sources.prompts import FilePrompts
    from accelbench.serve.sources.random_tokens import RandomPrompts
    from accelbench.serve.sources.traces import TracePrompts

    return {
        "random": RandomPrompts,
        "file": FilePrompts,
        "mlperf": MlperfPrompts,
        "trace": TracePrompts,
        "conversations": ConversationPrompts,
    }


def _misfits(value: Any, hint: Any, where: str, closed: bool = False, deep: bool = False) -> list[str]:
    """Where ``value`` is not of the annotation ``hint`` (a JSON value against a TypedDict's field): a key no type
    declares (``closed``: a writer's own TypedDict; ``deep``: its sub-records too), a value of another type, at any
    depth."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return []
    if origin in (typing.Union, types.UnionType):
        return [] if any(not _misfits(value, a, where) for a in args) else [f"{where}: {value!r:.60} is not {hint}"]
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} is none of {args}"]
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not {hint.__name__}"]
        hints = typing.get_type_hints(hint)
        out = [f"{where}.{k}: not declared in {hint.__name__}" for k in value if closed and k not in hints]
        for k, v in value.items():
            if k in hints:
                inner = closed and deep
                out += _misfits(v, hints[k], f"{where}.{k}", inner, deep)
        return out
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [m for i, v in enumerate(value) for m in _misfits(v, args[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        return [m for k, v in value.items() for m in _misfits(v, args[1], f"{where}.{k}")]
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, hint)
    return [] if ok else [f"{where}: {value!r:.60} is not {getattr(hint, '__name__', hint)}"]


def writer_misfits(r: Result) -> list[str]:
    """Every key of ``r.details`` its writer's TypedDict does not declare, and every value of another type than
    declared (an engine's facts against its own engine's type, a prompt source's record of its prompts against its
    own source's type, sub-records and all)."""
    kinds = _written_types()
    td = kinds.get(r.benchmark) or kinds[r.benchmark.split("/")[0]]
    details = dict(r.details)
    engine = details.get("engine")
    out = []
    if isinstance(engine, dict):  # an engine's facts against its own type
        own = _engine_types().get(str(engine.get("engine")))
        if own is not None:
            out += _misfits(details.pop("engine"), own, f"{r.benchmark}.engine", closed=True)
    prompts = details.get("prompts")
    if isinstance(prompts, dict):  # a source's prompts against its own type (a user's source: the common keys')
        own = _prompt_types().get(str(prompts.get("source")))
        if own is not None:
            out += _misfits(details.pop("prompts"), own, f"{r.benchmark}.prompts", closed=True, deep=True)
    return out + _misfits(details, td, r.benchmark, closed=True, deep=True)
