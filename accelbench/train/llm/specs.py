"""Parameters of ``train/llm``, decoder training (torch-free).

A batch is counted in sequences: ``--batch-size`` is the micro-batch each device runs per forward pass,
``--grad-accum`` how many micro-batches make one optimizer step, and the global batch is their product with
the number of devices (``--global-batch`` sets it and derives the micro-batch instead). Tokens per step are
the global batch x ``--seq-len``. The step is AdamW's (fused where the device has it), as torchtitan's and
MLPerf's LLM recipes step: the record states it (``optimizer``), no flag chooses another.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from accelbench.errors import UsageError
from accelbench.params import opt, positive
from accelbench.train.specs import TRAIN_PRECISIONS, TrainingParams, ranks_words
from accelbench.workloads import is_decoder

SHARDINGS = ("auto", "fsdp", "ddp", "none")
CHECKPOINTING = ("none", "selective", "full")
#: the sequence length of a training step where --seq-len is 0: MLPerf Training's llama3.1-8b pretraining and
#: torchtitan's llama3 configs train at 8192; the tiny scale at 128 (a 2-core CPU steps in milliseconds)
DEFAULT_SEQ_LEN = {"full": 8192, "tiny": 128}
#: the micro-batch per device where --batch-size is 'default': torchtitan's llama3 8B local batch at 8192
#: tokens is 1; at the tiny scale 8 sequences
DEFAULT_MICRO_BATCH = {"full": 1, "tiny": 8}
#: the optimizer every decoder run steps, as its record states
OPTIMIZER = "adamw"
#: the most steps a default window holds (as other training's windows)
MAX_WINDOW = 10


@dataclass(frozen=True)
class LLMTrainParams(TrainingParams):
    """Train decoder ``model`` on synthetic tokens: ``warmup`` optimizer steps, then ``num_batches`` measured."""

    model: str = opt(
        "llama3.1-8b", "decoder preset (accelbench list --models: llama3.1-8b, mixtral-8x7b, ...)", sweep=False
    )
    batch_size: str = opt(
        "default",
        "the micro-batch: sequences per device per forward pass, N or 'default' (1 at full scale, torchtitan's "
        "llama3 8B local batch; 8 tiny)",
    )
    precision: str = opt(
        "fp32",
        "fp32, tf32 (CUDA), amp_fp16/amp_bf16 (torch.autocast over fp32 master weights), bf16/fp16 (weights, "
        "gradients and AdamW's moments in that dtype), or fp8 (torchao's float8 linears inside bf16 autocast, on "
        "GPUs that have fp8)",
        choices=TRAIN_PRECISIONS,
    )
    seq_len: int | None = opt(
        None, "tokens per sequence; none: 8192, MLPerf's and torchtitan's (128 at --scale tiny)", metavar="TOKENS"
    )
    grad_accum: int = opt(1, "micro-batches accumulated into one optimizer step", sweep=False, metavar="N")
    global_batch: int = opt(
        0,
        "sequences per optimizer step over all devices; the micro-batch per device is this / (devices x "
        "--grad-accum) (0: --batch-size x devices x --grad-accum)",
        metavar="SEQUENCES",
    )
    sharding: str = opt(
        "auto",
        "over several ranks: fsdp (FSDP2 fully_shard: parameters, gradients and optimizer state sharded, one unit "
        "per decoder layer), ddp (a full replica per rank), auto (fsdp over several ranks, none on one)",
        choices=SHARDINGS,
    )
    activation_checkpointing: str = opt(
        "none",
        "recompute activations in the backward pass: full (each decoder layer's), selective (each layer's matmul "
        "and attention outputs kept, the rest recomputed), none",
        choices=CHECKPOINTING,
    )
    lora: int = opt(
        0,
        "LoRA fine-tuning at this rank through peft (adapters on the attention projections, the base frozen in "
        "the precision's 16-bit type), as MLPerf's llama2-70b LoRA task; 0: full training",
        metavar="RANK",
    )
    layers: int = opt(
        0,
        "build only this many decoder layers at the preset's widths (a real-size slice of the model on fewer "
        "devices; MFU is counted on what is built); 0: all",
        sweep=False,
        metavar="N",
    )
    display_every: int = opt(
        0,
        "steps per measurement window (0: --num-batches / 6, 1 to 10, so a short run still has the windows an "
        "interval needs)",
        sweep=False,
    )
    nproc: int = opt(1, "processes (devices) per node under torchrun (see --sharding); a list makes a scaling table")

    @classmethod
    def takes_model(cls, model: str) -> bool:
        """Decoder presets (``ModelInfo.serving == "tokens"``) train here; every other model is train/throughput's."""
        return is_decoder(model)

    def validate(self) -> None:
        from accelbench.workloads import model_info

        super().validate()
        info = model_info(self.model)  # an unknown name: one line with the nearest
        if not is_decoder(self.model):
            raise UsageError(
                f"{info.name} is not a decoder preset: this benchmark trains decoders (llama3.1-8b, mixtral-8x7b, "
                f"...); accelbench train {info.name} measures it as train/throughput"
            )
        if self.batch_size == "auto":
            raise UsageError("--batch-size auto is not searched for decoder training: give --batch-size N (sequences)")
        if self.batch_size != "default":
            try:
                value = int(self.batch_size)
            except ValueError:
                raise UsageError(
                    f"--batch-size must be a positive integer or 'default', got {self.batch_size!r}"
                ) from None
            positive("--batch-size", value)
        self._validate_batch()
        if self.lora and self.precision == "fp8":
            raise UsageError("--lora with --precision fp8 is not measured: LoRA's frozen base is held in bf16")
        if importlib.util.find_spec("transformers") is not None:  # else the run is skipped, saying what to install
            from accelbench.workloads.decoder import config_of, preset_of

            validate_shape(self, config_of(preset_of(self.model), self.scale), info.name)

    def _validate_batch(self) -> None:
        """The sequence, the accumulation and the global batch against the devices; the strategy against them."""
        positive("--grad-accum", self.grad_accum)
        if self.seq_len is not None and self.seq_len < 1:  # a sequence of no tokens trains nothing
            raise UsageError(
                f"--seq-len must be at least 1 token, got {self.seq_len} (leave it out for the scale's default, "
                f"{DEFAULT_SEQ_LEN['full']}; {DEFAULT_SEQ_LEN['tiny']} at --scale tiny)"
            )
        for flag, value in (("--global-batch", self.global_batch), ("--lora", self.lora), ("--layers", self.layers)):
            if value < 0:
                raise UsageError(f"{flag} must not be negative, got {value}")
        world = self.world_size
        if self.global_batch:
            per = world * self.grad_accum
            if self.global_batch % per:
                raise UsageError(
                    f"--global-batch {self.global_batch} is not divisible by devices x --grad-accum = {world} x "
                    f"{self.grad_accum}: give a multiple of {per}"
                )
            if self.batch_size not in ("default", str(self.global_batch // per)):
                raise UsageError(
                    f"--batch-size {self.batch_size} and --global-batch {self.global_batch} disagree: the micro-batch "
                    f"is {self.global_batch} / ({world} x {self.grad_accum}) = {self.global_batch // per}; give one "
                    "of them"
                )
        if self.sharding in ("fsdp", "ddp") and world == 1:
            raise UsageError(f"--sharding {self.sharding} spreads a model over ranks: add --nproc N (N > 1)")
        if self.sharding == "none" and world > 1:
            raise UsageError("--sharding none is one device: use fsdp or ddp with several ranks")

    @property
    def window(self) -> int:
        """Steps per measurement window (see :func:`window_of`)."""
        return window_of(self)

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        """As training's other records read (model, micro-batch, precision, ranks on devices), then the decoder's own
        settings where they are not the default."""
        words = [p["model"], f"bs={p['batch_size']}/device", p["precision"]]
        if ranks := ranks_words(p):
            words.append(ranks)
        if p.get("compile"):
            words.append("compile")
        if p.get("compile_mode", "default") != "default":
            words.append(p["compile_mode"])
        if p.get("seq_len"):
            words.append(f"seq={p['seq_len']}")
        if p.get("grad_accum", 1) > 1:
            words.append(f"accum={p['grad_accum']}")
        if p.get("sharding", "auto") not in ("auto", "none"):
            words.append(str(p["sharding"]))
        if p.get("activation_checkpointing", "none") != "none":
            words.append(f"ac={p['activation_checkpointing']}")
        if p.get("lora"):
            words.append(f"lora={p['lora']}")
        if p.get("layers"):
            words.append(f"{p['layers']} layers")
        if p.get("scale", "full") != "full":
            words.append(p["scale"])
        return " ".join(words)


def window_of(p: LLMTrainParams) -> int:
    """Steps per measurement window: an explicit --display-every as given, else as many steps (up to
    ``MAX_WINDOW``) as leave enough windows for the tokens/s interval: a decoder step is long, so a short run
    (--num-batches 12) with a window of 10 would measure a single window, and one sample has no interval."""
    from accelbench.measure.stats import MIN_CI_SAMPLES

    if p.display_every:
        return int(p.display_every)
    return max(1, min(MAX_WINDOW, p.num_batches // MIN_CI_SAMPLES))


def seq_len_of(p: LLMTrainParams) -> int:
    return p.seq_len or DEFAULT_SEQ_LEN[p.scale]


def sharding_of(p: LLMTrainParams) -> str:
    """The strategy a run uses: auto is FSDP2 over several ranks and none on one."""
    if p.sharding != "auto":
        return str(p.sharding)
    return "fsdp" if p.world_size > 1 else "none"


def micro_batch(p: LLMTrainParams) -> int:
    """Sequences per device per forward pass (from --global-batch where it is given)."""
    if p.global_batch:
        return int(p.global_batch // (p.world_size * p.grad_accum))
    return DEFAULT_MICRO_BATCH[p.scale] if p.batch_size == "default" else int(p.batch_size)


def validate_shape(p: LLMTrainParams, config: Any, name: str) -> None:
    """Checks against the preset's architecture: the sequence within its positions, the layers within its depth."""
    seq = seq_len_of(p)
    positions = int(getattr(config, "max_position_embeddings", 0) or 0)
    if positions and seq > positions:
        raise UsageError(f"--seq-len {seq} exceeds {name}'s {positions} positions at --scale {p.scale}")
    depth = int(config.num_hidden_layers)
    if p.layers > depth:
        raise UsageError(f"--layers {p.layers} exceeds {name}'s {depth} decoder layers")
