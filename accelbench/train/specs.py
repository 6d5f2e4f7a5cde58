"""Parameters of the training-throughput benchmark (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import tf32_math, unsupported_reason
from accelbench.errors import UsageError
from accelbench.kit import metrics as fig
from accelbench.kit.ranks import check_nproc
from accelbench.measure.stats import Measurement
from accelbench.params import (
    COMPILE_MODES,
    CommonParams,
    EmulatedParams,
    NodesParams,
    ScaleParams,
    check_steps,
    opt,
    parse_size,
    positive,
)
from accelbench.results.details import Details
from accelbench.results.record import Metric, Result
from accelbench.train.datasets import IMAGE_LAYOUTS, RATINGS_LAYOUT, data_format
from accelbench.train.decode import DECODERS, decoder_name
from accelbench.workloads import is_decoder, model_info

#: the real input pipeline's settings as a synthetic record keeps them: unused, so at their defaults (a
#: synthetic,real sweep hands both runs the same --data-dir, --workers and --decode)
UNUSED_PIPELINE = {"data_dir": "", "workers": -1, "decode": "auto"}

TRAIN_PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16", "bf16", "fp16", "fp8")


#: the optimizer --optimizer auto steps: SGD with momentum, tf_cnn_benchmarks'
DEFAULT_OPTIMIZER = "sgd"


def devices_used(nproc: int, nnodes: int, device: Any) -> int:
    """The distinct devices ``nproc`` ranks a node on ``nnodes`` nodes ran on: one CPU a node (its ranks share it
    and its peak), or each node's accelerators (ranks beyond their count share them). What a per-device figure
    divides by and a peak multiplies by."""
    from accelbench.devices.kind import kind_of

    nodes = max(int(nnodes or 1), 1)
    kind = kind_of(device)
    if not kind.accelerator:
        return nodes
    return nodes * max(1, min(nproc, kind.count() or nproc))


def ranks_words(p: dict[str, Any]) -> str | None:
    """How a record's ranks sit on devices, for its label: "x2 devices" only where each rank has a device of its
    own (an accelerator kind: more ranks than its devices are refused), "x2 ranks on 1 device" where the ranks
    share a node's host device (one CPU a node, as the record's ``devices`` detail counts it), and plain "x2
    ranks" where the record names no kind (``auto`` before a run): a device count said there would be a guess.
    None for a single rank."""
    from accelbench.devices.kind import by_name

    nodes = max(int(p.get("nnodes", 1) or 1), 1)
    world = int(p.get("nproc", 1) or 1) * nodes
    if world <= 1:
        return None
    kind = by_name(str(p.get("device", "auto")).partition(":")[0])
    if kind is None:
        return f"x{world} ranks"
    if kind.accelerator:
        return f"x{world} devices"
    return f"x{world} ranks on {nodes} device{'s' if nodes > 1 else ''}"


class TrainDetails(Details, total=False):
    """What a training record keeps beside its figures: what a sample is, how the steps were timed (the clock,
    the windows, a compiling device's graphs counted apart), the ranks and devices, the last loss, how peak memory
    was read, the FLOPs a sample costs, the input pipeline and its waits, an automatic batch size's trials, and a
    language model's own (its FLOP count, the state each device holds, its gradient accumulation and layout)."""

    domain: str
    sample_unit: str
    clock: str
    windows: int
    compiles: dict[str, Any]
    world_size: int
    backend: str | None
    devices: int
    final_loss: float
    peak_memory_method: str | None
    flops_per_sample: float
    #: --data-only: the pipeline timed alone
    data_only: bool
    pipeline: dict[str, Any]
    input_wait_seconds_per_window: list[float]
    auto_batch_trials: list[dict[str, Any]]
    auto_batch: dict[str, Any]
    #: why the measured windows ended before their number (a Ctrl-C, the timeout)
    stopped: str
    #: train/llm
    flops: dict[str, Any]
    state_bytes_per_device: int
    grad_accum: int
    layout: dict[str, Any]


def training_figures(work: float, m: Measurement, unit: str, devices: int, peak_memory: int) -> dict[str, Metric]:
    """What every training record reports: ``work`` a step as a rate (``unit``), per device, the step time and
    the peak memory."""
    throughput = fig.rate(work, m, unit)
    return {
        "throughput": throughput,
        "throughput_per_device": fig.scaled(throughput, 1 / devices),
        "step_seconds": fig.seconds(m),
        "peak_memory_bytes": fig.figure(peak_memory, "B", higher_is_better=False),
    }


def windowed_result(
    benchmark: str,
    record: dict[str, Any],
    m: Measurement,
    metrics: dict[str, Metric],
    details: TrainDetails,
    conditions: dict[str, Any],
    more: TrainDetails | None = None,
) -> Result:
    """The record of a measurement in windows: its figures, raw samples, clock (then ``more``) and conditions."""
    details |= {"clock": m.clock, "windows": m.n}
    if more:
        details |= more
    if "compiles" in m.meta:  # the compilation counted apart, on XLA
        details["compiles"] = m.meta["compiles"]
    return Result(
        benchmark,
        record,
        metrics=metrics,
        primary_metric="throughput",
        concerns=fig.concerns_of(m, conditions),
        conditions=conditions,
        samples=list(m.samples),
        details=details,
    )


@dataclass(frozen=True)
class TrainingParams(EmulatedParams, ScaleParams, NodesParams, CommonParams):
    """What every training benchmark takes (``train/throughput``, ``train/llm``): the step's compilation, the
    measured steps and the ranks, checked once."""

    precision: str = opt("fp32", "the arithmetic of the step", choices=TRAIN_PRECISIONS)
    compile: bool = opt(False, "torch.compile the model", sweep=False)
    compile_mode: str = opt(
        "default",
        "with --compile: torch.compile's mode (reduce-overhead: CUDA graphs, for small batches; max-autotune)",
        choices=COMPILE_MODES,
    )
    warmup: int = opt(10, "warm-up steps, not measured", sweep=False)
    num_batches: int = opt(100, "measured steps", sweep=False)
    display_every: int = opt(0, "steps per measurement window, the throughput samples", sweep=False)
    nproc: int = opt(1, "processes (devices) per node under torchrun; a list makes a scaling table")

    def validate(self) -> None:
        super().validate()
        check_steps(self.warmup, self.num_batches, self.display_every)
        if self.compile_mode != "default" and not self.compile:
            raise UsageError(f"--compile-mode {self.compile_mode} needs --compile")
        positive("--nproc", self.nproc)
        self.validate_nodes()

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes

    def check_environment(self, device_type: str) -> None:
        """Ranks this machine can start, and the precision's arithmetic on the device (tf32, fp8)."""
        if self.world_size > 1:
            check_nproc(self.nproc, device_type, self.nnodes)
        import torch

        kind = kind_of(device_type)
        precision = self.precision
        if precision == "fp8":
            why = kind.float8_training_reason(torch.device(device_type))
            if why:
                raise UsageError(f"--precision fp8: {why}")
        why = unsupported_reason(torch.device(device_type), "tf32") if tf32_math(precision) else None
        if why:
            raise UsageError(f"--precision tf32: the {kind.name} device cannot run it ({why})")


@dataclass(frozen=True)
class TrainParams(TrainingParams):
    """Train ``model`` on synthetic batches: ``warmup`` steps, then ``num_batches`` measured steps. Decoder
    presets are another benchmark's (``train/llm``: tokens, sequences, sharding)."""

    model: str = opt("resnet50", "model name (accelbench list --models) or package.module:Class", sweep=False)
    batch_size: str = opt("default", "per-device batch size: N, 'default' (the model's) or 'auto' (largest that fits)")
    precision: str = opt(
        "fp32",
        "fp32, tf32 (CUDA), mixed precision amp_fp16/amp_bf16 (torch.autocast: fp32 weights), or bf16/fp16 (the "
        "model's weights, activations and gradients in that dtype: no fp32 master copy, no loss scaling); fp8: "
        "decoder models only",
        choices=TRAIN_PRECISIONS,
    )
    channels_last: bool = opt(False, "NHWC memory layout (image models only)", sweep=False)
    data: str = opt(
        "synthetic",
        "synthetic (batches made on the device once: the compute alone) or real (read from --data-dir through "
        "a DataLoader each step: decoding and augmentation included); synthetic,real compares them",
        choices=("synthetic", "real"),
    )
    data_dir: str = opt(
        "",
        "with --data real: image class folders (ImageFolder), CIFAR-10 batches or MNIST IDX for image models; "
        "MovieLens ratings.csv for ncf",
        sweep=False,
        metavar="DIR",
    )
    workers: int = opt(
        -1,
        "with --data real: DataLoader worker processes (-1: the cores available to this rank, less one, at most 8; "
        "0: loading in the training process)",
    )
    decode: str = opt(
        "auto",
        "with --data real on image class folders: where JPEGs are decoded: cpu (PIL in the DataLoader workers), "
        "device (on the training device via torchvision, a batch per call, augmentation there: nvJPEG on NVIDIA "
        "GPUs; cuda is the same), auto (device when training on one whose torchvision can, else cpu)",
        choices=DECODERS,
    )
    data_only: bool = opt(
        False, "with --data real: time the input pipeline alone (the images/s it can deliver: its ceiling)", sweep=False
    )
    optimizer: str = opt(
        "auto",
        "sgd (momentum 0.9) or adamw (fused where the device has it); auto: sgd, tf_cnn_benchmarks' (decoder "
        "models step AdamW)",
        choices=("auto", "sgd", "adamw"),
    )
    display_every: int = opt(
        0,
        "steps per measurement window, the throughput samples (0: 10, or --num-batches if fewer)",
        sweep=False,
    )
    max_batch_size: int = opt(
        0, "with --batch-size auto: the largest batch tried, e.g. a published one (0: no limit)", sweep=False
    )
    memory_cap: str = opt(
        "", "with --batch-size auto: treat more than this much memory (e.g. 4G) as out of memory", sweep=False
    )

    def __post_init__(self) -> None:
        # --decode cuda, the on-device decoder's first name, is read as today's: the record says what ran
        object.__setattr__(self, "decode", decoder_name(self.decode))
        if self.optimizer == "auto":  # the record says which ran
            object.__setattr__(self, "optimizer", DEFAULT_OPTIMIZER)

    @classmethod
    def takes_model(cls, model: str) -> bool:
        """Every model but a decoder preset (those train as ``train/llm``)."""
        return not is_decoder(model)

    def validate(self) -> None:
        super().validate()
        info = model_info(self.model)
        if is_decoder(self.model):  # the command line and suites route a decoder to train/llm before this
            raise UsageError(
                f"{info.name} is a decoder, trained by the benchmark train/llm: use accelbench train {info.name}"
            )
        if self.batch_size not in ("default", "auto"):
            try:
                value = int(self.batch_size)
            except ValueError:
                raise UsageError(
                    f"--batch-size must be a positive integer, 'default' or 'auto', got {self.batch_size!r}"
                ) from None
            positive("--batch-size", value)
        if self.precision == "fp8":
            raise UsageError(f"--precision fp8 trains decoder models (torchao float8); {info.name} is not one")
        self._validate_data(info)
        if self.channels_last and not info.image_input:
            raise UsageError(f"--channels-last applies to image models; {info.name} has no 4-D image input")
        if self.world_size > 1 and self.batch_size == "auto":
            raise UsageError("--batch-size auto searches on one device: find it with --nproc 1, then pass the number")
        if self.memory_cap:
            parse_size(self.memory_cap)
        if (self.memory_cap or self.max_batch_size) and self.batch_size != "auto":
            raise UsageError("--memory-cap and --max-batch-size only apply with --batch-size auto")
        if self.max_batch_size < 0:
            raise UsageError(f"--max-batch-size must not be negative, got {self.max_batch_size}")

    def _validate_data(self, info: Any) -> None:
        if self.data == "real":
            if not self.data_dir:
                what = RATINGS_LAYOUT if info.name == "ncf" else IMAGE_LAYOUTS
                raise UsageError(f"--data real needs --data-dir DIR: {what}")
            fmt = data_format(info.name, info.domain, self.data_dir)  # a malformed folder: bad input, before a run
            if self.decode == "device" and fmt != "imagefolder":
                raise UsageError(f"--decode device decodes JPEG files; --data-dir {self.data_dir} holds {fmt} data")
        elif self.data_only:  # --data-dir and --workers may ride along in a synthetic,real sweep: unused there
            raise UsageError("--data-only times the real input pipeline: it applies to --data real")
        elif not self.data_dir and (self.workers != -1 or self.decode != "auto"):
            # alone (no sweep with real data beside it) they would be silently ignored
            flag = "--workers" if self.workers != -1 else "--decode"
            raise UsageError(f"{flag} sets up the real input pipeline: add --data-dir DIR (--data real)")
        if self.workers < -1:
            raise UsageError(f"--workers must be -1 (automatic) or a count, got {self.workers}")
        if self.data_only and self.nproc * self.nnodes > 1:
            raise UsageError("--data-only times one rank's input pipeline: use --nproc 1")
        if self.data_only and (self.compile or self.batch_size == "auto"):
            raise UsageError("--data-only times the input pipeline alone: drop --compile and --batch-size auto")

    @property
    def window(self) -> int:
        """Steps per measurement window: the explicit --display-every, or 10 capped at --num-batches."""
        return self.display_every or min(10, self.num_batches)

    def check_environment(self, device_type: str) -> None:
        super().check_environment(device_type)

        kind = kind_of(device_type)
        if self.data == "real" and self.decode == "device" and not kind.jpeg_decode:
            raise UsageError(
                f"--decode device decodes JPEGs on the GPU (torchvision: nvJPEG on NVIDIA GPUs); use --decode cpu "
                f"on the {kind.name} device"
            )

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        words = [p["model"], f"bs={p['batch_size']}/device", p["precision"]]
        if ranks := ranks_words(p):
            words.append(ranks)
        words += [w for w in ("compile", "channels_last") if p.get(w)]
        if p.get("compile_mode", "default") != "default":
            words.append(p["compile_mode"])
        if p.get("optimizer", "auto") not in ("auto", DEFAULT_OPTIMIZER):
            words.append(p["optimizer"])
        if p.get("data", "synthetic") == "real":
            words.append("real data only" if p.get("data_only") else "real data")
            if p.get("decode", "auto") != "auto":
                words.append(f"decoded on {p['decode']}")
        if p.get("scale", "full") != "full":
            words.append(p["scale"])
        return " ".join(words)
