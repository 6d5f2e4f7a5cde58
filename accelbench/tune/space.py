"""The settings a search tries, in two stages, and the ones it leaves out with the reason.

The space is searched one axis group at a time, as a person tuning by hand would: first the runtime
(backend, precision, memory format, compilation) at the default batch, then the shape of the work (batch
size, requests in flight) around the best runtimes. A full product of every axis would spend a 10-minute
budget on a tenth of it; the staged search screens every runtime and still reaches the batch that suits the
winner. What this device cannot run natively is left out before anything is timed, with the reason the
benchmark itself would give, so a search never spends its budget on torch's fallbacks.
"""

from __future__ import annotations

from typing import Any

from accelbench.errors import UsageError
from accelbench.tune.candidate import Candidate, Space, split_list
from accelbench.tune.specs import TuneParams

#: infer's defaults: the candidate every other is measured against
INFER_DEFAULT = {"backend": "torch", "precision": "fp32", "channels_last": False, "batch_size": 8, "streams": 1}
TRAIN_DEFAULT = {"precision": "fp32", "channels_last": False, "compile": False, "batch_size": "default"}
#: batch sizes tried around the best runtimes when --batch-sizes is not given, by the device's batch class
INFER_BATCHES = {"cpu": (16, 32), "gpu": (32, 128, 256)}
#: backends whose compute threads follow --threads (torch's intra-op pool, ONNX Runtime's intra-op threads)
THREADED_BACKENDS = ("torch", "compile", "onnxruntime", "int8")
#: from this many cores, a CPU search also tries leaving one or two to the harness (see shape_stage)
MANY_CORES = 8


def _device(params: TuneParams) -> Any:
    from accelbench.devices import resolve_device

    return resolve_device(params.device)


def runtime_stage(params: TuneParams) -> Space:
    """Every runtime at the default batch: the default first, compiled ones last (each compile costs minutes)."""
    if params.task == "serve":
        from accelbench.tune.serve import runtimes, serve_default

        space = runtimes(params, _device(params))
        return _ordered(space, Candidate(serve_default()), lambda c: bool(c.settings.get("engine_compile")))
    return _infer_runtimes(params) if params.task == "infer" else _train_runtimes(params)


def _infer_runtimes(params: TuneParams) -> Space:
    from accelbench.devices.precision import precision_reason
    from accelbench.infer.catalog import BACKENDS, backend
    from accelbench.workloads import model_info

    device = _device(params)
    image = model_info(params.model).image_input
    names = split_list(params.backends) or [n for n, c in BACKENDS.items() if c.runs_model]
    names = [n for n in names if params.compile or n != "compile"]
    wanted = split_list(params.precisions)
    space = Space([], [])
    for name in names:
        impl = backend(name)
        for precision in impl.precisions:
            if wanted and precision not in wanted:
                continue
            for cl in (False, True) if image and "channels_last" in impl.options else (False,):
                c = Candidate(INFER_DEFAULT | {"backend": name, "precision": precision, "channels_last": cl})
                computes = name in ("torch", "compile") and precision != "fp32"
                why = impl.unsupported(precision) or params.trial_params(**c.settings).export_refusal()
                why = why or (precision_reason(device, precision, params.emulated) if computes else None)
                why = why or impl.unsupported_on(device.type)
                if not why and name == "openvino" and params.scenario != "singlestream":
                    c = c.with_(streams=_openvino_requests())
                for mode in _compile_modes(device) if name == "compile" else (None,):
                    one = c.with_(compile_mode=mode) if mode else c
                    (space.left_out.append((one, why)) if why else space.candidates.append(one))
    default = Candidate(dict(INFER_DEFAULT))
    return _ordered(space, default, lambda c: c.settings["backend"] == "compile")


def _compile_modes(device: Any) -> tuple[str, ...]:
    """torch.compile's default, and where the device captures graphs its CUDA-graph mode (reduce-overhead):
    launch latency is what small batches lose."""
    from accelbench.devices.kind import kind_of

    return ("default", "reduce-overhead") if kind_of(device).graphs else ("default",)


def _openvino_requests() -> int:
    """OpenVINO's throughput hint keeps this many requests busy: one would leave its other streams idle."""
    from accelbench.infer.openvino import optimal_requests

    return optimal_requests()


def _train_runtimes(params: TuneParams) -> Space:
    from accelbench.devices.precision import precision_reason
    from accelbench.train.specs import TRAIN_PRECISIONS
    from accelbench.workloads import model_info

    device = _device(params)
    image = model_info(params.model).image_input
    wanted = split_list(params.precisions)
    space = Space([], [])
    for precision in TRAIN_PRECISIONS:
        if wanted and precision not in wanted:
            continue
        why = None if precision == "fp32" else precision_reason(device, precision, params.emulated)
        modes = [None, *_compile_modes(device)] if params.compile else [None]
        for mode in modes:
            for cl in (False, True) if image else (False,):
                c = Candidate(
                    TRAIN_DEFAULT | {"precision": precision, "channels_last": cl, "compile": mode is not None}
                )
                c = c.with_(compile_mode=mode) if mode else c
                (space.left_out.append((c, why)) if why else space.candidates.append(c))
    return _ordered(space, Candidate(dict(TRAIN_DEFAULT)), lambda c: bool(c.settings["compile"]))


def _ordered(space: Space, default: Candidate, slow: Any) -> Space:
    keys = [c.key for c in space.candidates]
    if default.key not in keys:
        if not space.candidates:
            raise UsageError("nothing to search: every combination asked for is left out here; widen the lists")
        first = space.candidates[0]
    else:
        first = space.candidates[keys.index(default.key)]
    rest = [c for c in space.candidates if c is not first]
    space.candidates = [first] + [c for c in rest if not slow(c)] + [c for c in rest if slow(c)]
    return space


def _cores() -> int:
    from accelbench.system.cpu import usable_cores

    return usable_cores()


def shape_stage(params: TuneParams, best: list[Candidate], tried: set[str]) -> list[Candidate]:
    """Batch sizes (and, for OpenVINO on a CPU, requests in flight) around the best runtimes, not yet tried.

    SingleStream sends one sample per query, so neither its batch nor its requests change its figure. On a CPU
    with many cores the best runtime is also tried with one and two cores left to LoadGen and the serving
    thread. Measured on a 16-core Sapphire Rapids (torch bf16 + channels_last, batch 8, Offline): 129.7
    samples/s with 16 threads and 147.3 with 14, where a bare loop gave 173.1 and 148.1: the harness's own
    threads cost most when every core computes, so the search measures which count serves best.
    """
    if params.task == "infer" and params.scenario == "singlestream":
        return []
    device = _device(params)
    out: list[Candidate] = []
    if params.task == "serve":
        from accelbench.devices.kind import kind_of
        from accelbench.tune.serve import shapes

        out = shapes(params, best, kind_of(device).batch_class)
    for c in best if params.task != "serve" else []:
        for b in _batches(params, c, device):
            out.append(c.with_(batch_size=b))
        if params.task == "infer" and c.settings["backend"] == "openvino":
            for n in sorted({1, 2, _cores()}):
                out.append(c.with_(streams=n))
    if params.task == "infer" and device.type == "cpu" and params.threads is None and best:
        top, cores = best[0], _cores()
        if top.settings["backend"] in THREADED_BACKENDS and cores >= MANY_CORES:
            out += [top.with_(threads=cores - spare) for spare in (1, 2)]
    seen = set(tried)
    unique = []
    for c in out:
        if c.key not in seen:
            seen.add(c.key)
            unique.append(c)
    return unique


def _batches(params: TuneParams, c: Candidate, device: Any) -> list[Any]:
    from accelbench.devices.kind import kind_of

    given = [int(b) for b in split_list(params.batch_sizes)]
    batch_class = kind_of(device).batch_class  # "gpu" or "cpu": the class published batch sizes are given for
    if params.task == "infer":
        return given or list(INFER_BATCHES.get(batch_class, INFER_BATCHES["cpu"]))
    from accelbench.workloads import model_info

    base = model_info(params.model).default_batch.get(batch_class, 32)
    sizes = given or [max(1, base // 2), base * 2]
    return [str(b) for b in sizes if b != base]  # the model's default batch is the "default" already screened


def grouped(left_out: list[tuple[Candidate, str]]) -> list[tuple[str, list[str]]]:
    """The left-out candidates by reason, so that one reason is said once."""
    out: dict[str, list[str]] = {}
    for c, why in left_out:
        out.setdefault(why, []).append(c.label())
    return list(out.items())
