"""The flags of decoder training (a mixin of :class:`~accelbench.train.specs.TrainParams`), torch-free.

A batch is counted in sequences: ``--batch-size`` is the micro-batch each device runs per forward pass,
``--grad-accum`` how many micro-batches make one optimizer step, and the global batch is their product with
the number of devices (``--global-batch`` sets it and derives the micro-batch instead). Tokens per step are
the global batch x ``--seq-len``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.errors import UsageError
from accelbench.params import opt, positive

SHARDINGS = ("auto", "fsdp", "ddp", "none")
CHECKPOINTING = ("none", "selective", "full")
#: the sequence length of a training step where --seq-len is 0: MLPerf Training's llama3.1-8b pretraining and
#: torchtitan's llama3 configs train at 8192; the tiny scale at 128 (a 2-core CPU steps in milliseconds)
DEFAULT_SEQ_LEN = {"full": 8192, "tiny": 128}
#: the micro-batch per device where --batch-size is 'default': torchtitan's llama3 8B local batch at 8192
#: tokens is 1; at the tiny scale 8 sequences
DEFAULT_MICRO_BATCH = {"full": 1, "tiny": 8}
#: the flags that only mean something for a decoder, with their neutral values
LLM_ONLY = {"seq_len": 0, "grad_accum": 1, "global_batch": 0, "activation_checkpointing": "none", "lora": 0,
            "layers": 0, "sharding": "auto"}  # fmt: skip


@dataclass(frozen=True)
class LLMTrainParams:
    """Decoder training's flags; each refused on a model that is not a decoder (see :func:`validate_llm`)."""

    seq_len: int = opt(
        0, "decoder models: tokens per sequence (0: 8192, MLPerf's and torchtitan's; 128 tiny)", metavar="TOKENS"
    )
    grad_accum: int = opt(
        1, "decoder models: micro-batches accumulated into one optimizer step", sweep=False, metavar="N"
    )
    global_batch: int = opt(
        0,
        "decoder models: sequences per optimizer step over all devices; the micro-batch per device is this / "
        "(devices x --grad-accum) (0: --batch-size x devices x --grad-accum)",
        metavar="SEQUENCES",
    )
    sharding: str = opt(
        "auto",
        "decoder models over several ranks: fsdp (FSDP2 fully_shard: parameters, gradients and optimizer state "
        "sharded, one unit per decoder layer), ddp (a full replica per rank), auto (fsdp over several ranks, "
        "none on one)",
        choices=SHARDINGS,
    )
    activation_checkpointing: str = opt(
        "none",
        "decoder models: recompute activations in the backward pass: full (each decoder layer's), selective "
        "(each layer's matmul and attention outputs kept, the rest recomputed), none",
        choices=CHECKPOINTING,
    )
    lora: int = opt(
        0,
        "decoder models: LoRA fine-tuning at this rank through peft (adapters on the attention projections, "
        "the base frozen in the precision's 16-bit type), as MLPerf's llama2-70b LoRA task; 0: full training",
        metavar="RANK",
    )
    layers: int = opt(
        0,
        "decoder models: build only this many decoder layers at the preset's widths (a real-size slice of the "
        "model on fewer devices; MFU is counted on what is built); 0: all",
        sweep=False,
        metavar="N",
    )


#: the most steps a default window holds (as other training's windows)
MAX_WINDOW = 10


def window_of(p: Any) -> int:
    """Steps per measurement window: an explicit --display-every as given, else as many steps (up to
    ``MAX_WINDOW``) as leave enough windows for the tokens/s interval: a decoder step is long, so a short run
    (--num-batches 12) with a window of 10 would measure a single window, and one sample has no interval."""
    from accelbench.measure.stats import MIN_CI_SAMPLES

    if p.display_every:
        return int(p.display_every)
    return max(1, min(MAX_WINDOW, p.num_batches // MIN_CI_SAMPLES))


def seq_len_of(p: Any) -> int:
    return p.seq_len or DEFAULT_SEQ_LEN[p.scale]


def sharding_of(p: Any) -> str:
    """The strategy a run uses: auto is FSDP2 over several ranks and none on one."""
    if p.sharding != "auto":
        return str(p.sharding)
    return "fsdp" if p.world_size > 1 else "none"


def micro_batch(p: Any) -> int:
    """Sequences per device per forward pass (from --global-batch where it is given)."""
    if p.global_batch:
        return int(p.global_batch // (p.world_size * p.grad_accum))
    return DEFAULT_MICRO_BATCH[p.scale] if p.batch_size == "default" else int(p.batch_size)


def validate_llm(p: Any, decoder: bool, name: str) -> None:
    """Bad decoder-training input, one line each; every decoder flag refused on a model that is not one."""
    if not decoder:
        for field, neutral in LLM_ONLY.items():
            if getattr(p, field) != neutral:
                flag = "--" + field.replace("_", "-")
                raise UsageError(f"{flag} applies to decoder models (llama3.1-8b, ...); {name} is not one")
        if p.precision == "fp8":
            raise UsageError(f"--precision fp8 trains decoder models (torchao float8); {name} is not one")
        return
    for flag, value in (("--grad-accum", p.grad_accum),):
        positive(flag, value)
    for flag, value in (("--seq-len", p.seq_len), ("--global-batch", p.global_batch), ("--lora", p.lora),
                        ("--layers", p.layers)):  # fmt: skip
        if value < 0:
            raise UsageError(f"{flag} must not be negative, got {value}")
    if p.batch_size == "auto":
        raise UsageError("--batch-size auto is not searched for decoder training: give --batch-size N (sequences)")
    if p.data == "real" or p.channels_last or p.data_only or p.workers != -1 or p.decode != "auto":
        raise UsageError(
            "decoder training runs on synthetic tokens: --data real, --data-only, --workers, --decode and "
            "--channels-last apply to the other models (a text corpus is trained on by accelbench tta)"
        )
    world = p.world_size
    if p.global_batch:
        per = world * p.grad_accum
        if p.global_batch % per:
            raise UsageError(
                f"--global-batch {p.global_batch} is not divisible by devices x --grad-accum = {world} x "
                f"{p.grad_accum}: give a multiple of {per}"
            )
        if p.batch_size not in ("default", str(p.global_batch // per)):
            raise UsageError(
                f"--batch-size {p.batch_size} and --global-batch {p.global_batch} disagree: the micro-batch is "
                f"{p.global_batch} / ({world} x {p.grad_accum}) = {p.global_batch // per}; give one of them"
            )
    if p.sharding in ("fsdp", "ddp") and world == 1:
        raise UsageError(f"--sharding {p.sharding} spreads a model over ranks: add --nproc N (N > 1)")
    if p.sharding == "none" and world > 1:
        raise UsageError("--sharding none is one device: use fsdp or ddp with several ranks")
    if p.lora and p.precision == "fp8":
        raise UsageError("--lora with --precision fp8 is not measured: LoRA's frozen base is held in bf16")


def validate_shape(p: Any, config: Any, name: str) -> None:
    """Checks against the preset's architecture: the sequence within its positions, the layers within its depth."""
    seq = seq_len_of(p)
    positions = int(getattr(config, "max_position_embeddings", 0) or 0)
    if positions and seq > positions:
        raise UsageError(f"--seq-len {seq} exceeds {name}'s {positions} positions at --scale {p.scale}")
    depth = int(config.num_hidden_layers)
    if p.layers > depth:
        raise UsageError(f"--layers {p.layers} exceeds {name}'s {depth} decoder layers")


def describe_llm(p: dict[str, Any]) -> list[str]:
    """The words a decoder run adds to its workload's description."""
    words = []
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
    return words
