"""``tune MODEL`` for a model served a batch at a time (``infer/loadgen``): backends, precisions, memory formats and
compilation, then batch sizes and requests in flight, each trial a LoadGen run in the scenario ranked.

Finalists pass the accuracy gate first (:mod:`accelbench.infer.accuracy`). Server is screened on Offline throughput
(a find-peak per candidate would spend the budget) and confirmed by find-peak; SingleStream sends one sample per
query, so neither its batch nor its requests are searched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from accelbench.devices.precision import precision_reason
from accelbench.errors import UsageError
from accelbench.infer.catalog import BACKENDS, backend
from accelbench.infer.specs import INFER_PRECISIONS, InferParams
from accelbench.params import NoOptions, opt
from accelbench.tune.budget import LOADGEN_PACE
from accelbench.tune.candidate import Candidate, Space, split_list
from accelbench.tune.task import (
    CONFIRM_SECONDS,
    GATE_SCREENS,
    SCREEN_SECONDS,
    TuneTask,
    batch_class,
    checkpoint_option,
    compile_modes,
    device_of,
    ordered,
    trial_base,
    weights_words,
)
from accelbench.workloads import model_info

#: the scenarios a search ranks by: Offline samples/s, Server peak QPS within the bound, SingleStream p90
TUNE_SCENARIOS = ("offline", "server", "singlestream")
#: infer's defaults: the candidate every other is measured against
INFER_DEFAULT = {"backend": "torch", "precision": "fp32", "channels_last": False, "batch_size": 8, "streams": 1}
#: batch sizes tried around the best runtimes when --batch-sizes is not given, by the device's batch class
INFER_BATCHES = {"cpu": (16, 32), "gpu": (32, 128, 256)}
#: backends whose compute threads follow --threads (torch's intra-op pool, ONNX Runtime's intra-op threads)
THREADED_BACKENDS = ("torch", "compile", "onnxruntime", "int8")
#: from this many cores, a CPU search also tries leaving one or two to the harness (see LoadGenTask.shapes)
MANY_CORES = 8


@dataclass(frozen=True)
class LoadGenOptions(NoOptions):
    """``tune``'s flags for a model served a batch at a time."""

    scenario: str = opt(
        "offline",
        "an image model's figure ranked: offline (samples/s), server (peak QPS within the latency bound, by "
        "find-peak), singlestream (p90 latency)",
        choices=TUNE_SCENARIOS,
        sweep=False,
    )
    backends: str = opt(
        "", "an image model's backends tried, comma-separated (empty: every installed one)", metavar="LIST", sweep=False
    )
    checkpoint: str = checkpoint_option()
    dataset: str = opt(
        "", "an image model's accuracy gate scores its dataset's labels (DIR)", metavar="DIR", sweep=False
    )

    def check(self) -> None:
        for b in split_list(self.backends):
            if b not in BACKENDS or not BACKENDS[b].runs_model:
                serving = [n for n, c in BACKENDS.items() if c.runs_model]
                raise UsageError(f"unknown backend {b!r} in --backends: choose among {', '.join(serving)}")


class LoadGenTask(TuneTask):
    """The search of ``infer/loadgen``'s settings."""

    name = "infer/loadgen"
    command = "infer"
    params = InferParams
    Options = LoadGenOptions
    options: LoadGenOptions

    def check(self) -> None:
        if not self.tune.compile and "compile" in split_list(self.options.backends):
            raise UsageError("--no-compile leaves out the compile backend that --backends names: drop one")
        # the gate's own checks: an unreadable checkpoint or dataset is bad input before any trial
        gate = {"mode": "accuracy", "dataset": self.options.dataset} if self.options.dataset else {}
        self.trial(**gate).validate()

    def precisions(self) -> tuple[str, ...]:
        return tuple(p for p in INFER_PRECISIONS if p != "auto")

    @property
    def _server(self) -> bool:
        return self.options.scenario == "server"

    # -- the space ----------------------------------------------------------------------------------------------

    def default(self) -> Candidate:
        return Candidate(dict(INFER_DEFAULT))

    def runtimes(self) -> Space:
        tune, device = self.tune, device_of(self.tune)
        image = model_info(tune.model).image_input
        names = split_list(self.options.backends) or [n for n, c in BACKENDS.items() if c.runs_model]
        names = [n for n in names if tune.compile or n != "compile"]
        wanted = split_list(tune.precisions)
        space = Space([], [])
        for name in names:
            impl = backend(name)
            for precision in impl.precisions:
                if wanted and precision not in wanted:
                    continue
                for cl in (False, True) if image and "channels_last" in impl.options else (False,):
                    c = Candidate(INFER_DEFAULT | {"backend": name, "precision": precision, "channels_last": cl})
                    computes = name in ("torch", "compile") and precision != "fp32"
                    why = impl.unsupported(precision) or self.trial(**c.settings).export_refusal()
                    why = why or (precision_reason(device, precision, tune.emulated) if computes else None)
                    why = why or impl.unsupported_on(device.type)
                    if not why and name == "openvino" and self.options.scenario != "singlestream":
                        c = c.with_(streams=_openvino_requests())
                    for mode in compile_modes(device) if name == "compile" else (None,):
                        one = c.with_(compile_mode=mode) if mode else c
                        (space.left_out.append((one, why)) if why else space.candidates.append(one))
        return ordered(space, self.default(), lambda c: c.settings["backend"] == "compile")

    def batches(self, device: Any) -> list[int]:
        """Batch sizes tried around the best runtimes: ``--batch-sizes``, else the device class's spread."""
        given = [int(b) for b in split_list(self.tune.batch_sizes)]
        return given or list(INFER_BATCHES.get(batch_class(device), INFER_BATCHES["cpu"]))

    def shapes(self, best: list[Candidate]) -> list[Candidate]:
        """Batch sizes (and, for OpenVINO, requests in flight) around the best runtimes; on a CPU with many cores
        the best threaded runtime with one and two cores left to the harness, whose own threads cost most when every
        core computes (docs/tune.md, The stages)."""
        if self.options.scenario == "singlestream":
            return []
        device = device_of(self.tune)
        out: list[Candidate] = []
        for c in best:
            out += [c.with_(batch_size=b) for b in self.batches(device)]
            if c.settings["backend"] == "openvino":
                out += [c.with_(streams=n) for n in sorted({1, 2, _cores()})]
        if device.type == "cpu" and self.tune.threads is None and best:
            top, cores = best[0], _cores()
            if top.settings["backend"] in THREADED_BACKENDS and cores >= MANY_CORES:
                out += [top.with_(threads=cores - spare) for spare in (1, 2)]
        return out

    def is_reference(self, candidate: Candidate) -> bool:
        """The FP32 eager model in its default layout is the gate's reference."""
        s = candidate.settings
        return s.get("backend") == "torch" and s.get("precision") == "fp32" and not s.get("channels_last")

    # -- the trials ---------------------------------------------------------------------------------------------

    def trial(self, **settings: Any) -> InferParams:
        common = trial_base(self.tune) | {"checkpoint": self.options.checkpoint}
        # a candidate's settings are flat (channels_last beside batch_size): the backend's own go where it keeps them
        return InferParams.of(**(common | settings))

    def trial_of(self, phase: str, settings: dict[str, Any]) -> InferParams:
        if phase == "gate":
            extra: dict[str, Any] = {"mode": "accuracy", "scenario": "offline", "dataset": self.options.dataset}
        elif phase == "confirm" and self._server:
            extra = {"mode": "find-peak", "scenario": "server", "duration": SCREEN_SECONDS}
        else:  # Server is screened on Offline throughput: a find-peak per candidate would spend the budget
            scenario = "offline" if self._server else self.options.scenario
            extra = {"scenario": scenario, "duration": CONFIRM_SECONDS if phase == "confirm" else SCREEN_SECONDS}
        return self.trial(**settings, **extra)

    def first_expected(self, phase: str, per_sample: Callable[[], float | None]) -> tuple[float, float] | None:
        """A LoadGen confirmation pays a screening's start, load and probe, and its 4 s more of LoadGen take
        ``LOADGEN_PACE`` times as long (docs/tune.md says what was measured); Server's find-peak is a search
        of several runs, four at least. A gate pays ``GATE_SCREENS`` screenings and runs the FP32 reference and the
        candidate over the gate's samples, and the FP32 model rounded twice (fidelity's twins) over a quarter of
        them, at about the reference's screened rate."""
        if phase == "confirm":
            return (4.0, 0.0) if self._server else (1.0, LOADGEN_PACE * (CONFIRM_SECONDS - SCREEN_SECONDS))
        if phase == "gate" and not self.options.dataset:
            from accelbench.infer.accuracy import ROUNDING_SAMPLES
            from accelbench.infer.run import SYNTHETIC_ACCURACY_SAMPLES

            seconds = per_sample()
            samples = 2 * SYNTHETIC_ACCURACY_SAMPLES + 2 * ROUNDING_SAMPLES  # + the rounded twins, for fidelity
            return (GATE_SCREENS, samples * seconds) if seconds else None
        return None

    # -- the outcome --------------------------------------------------------------------------------------------

    def _weights(self) -> str:
        return weights_words(self.options.checkpoint)

    def gate_words(self) -> str:
        if self.options.dataset:
            labels = self.options.dataset
            return f"MLPerf's 99% of the FP32 reference's quality on the labels of {labels}, {self._weights()}"
        return (
            f"fidelity to FP32 on {self._weights()} and synthetic samples: a bf16, fp16 or INT8 path's outputs within "
            "twice what rounding the FP32 model to that precision moves them; an FP32 candidate's answers 99% the same"
        )

    def accuracy_words(self) -> str | None:
        if self.options.dataset:
            return f"accuracy verified on the labels of {self.options.dataset}"
        return f"accuracy not verified: fidelity to FP32 on {self._weights()} (--dataset DIR verifies it)"

    @classmethod
    def describe_words(cls, p: dict[str, Any]) -> list[str]:
        return [str(p.get("scenario", "offline"))]


def _openvino_requests() -> int:
    """OpenVINO's throughput hint keeps this many requests busy: one would leave its other streams idle."""
    from accelbench.infer.openvino import optimal_requests

    return optimal_requests()


def _cores() -> int:
    from accelbench.system.cpu import usable_cores

    return usable_cores()
