"""A decoder's training record beside published LLM training tokens/s per GPU (torchtitan's, NeMo's): what makes the
two the same work, and what else differs, in the reader's words.

:mod:`.match` selects the rows; this module adds what only language-model training has. No ratio at another
sequence length (tokens/s falls as attention's share of each token grows with the context), with LoRA or with a
slice of the layers; the framework, micro-batch, checkpointing and parallelism are said beside the per-device
ratio (docs/reference.md)."""

from __future__ import annotations

from accelbench.reference.table import Reference
from accelbench.results.record import Result


def is_llm_train(ref: Reference) -> bool:
    """A row of a language model's training tokens/s (torchtitan's TPS/GPU, NeMo's Tokens / sec / GPU)."""
    return ref.task == "train_throughput" and ref.unit.startswith("tokens/s")


def _int(r: Result, key: str) -> int:
    try:
        return int(r.params.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def devices(r: Result) -> int:
    return max(1, _int(r, "nproc")) * max(1, _int(r, "nnodes"))


def unlike(r: Result, ref: Reference) -> list[str]:
    """Why a training record and a tokens/s row did different work beyond what every row checks (scale, model,
    precision, validity: :func:`.match.unlike`): another sequence length, LoRA, a slice of the layers."""
    out = []
    seq = _int(r, "seq_len")
    if ref.seq_len is not None and seq != ref.seq_len:
        here = f"{seq} here" if seq else "not recorded here"
        out.append(f"sequence length differs ({ref.seq_len} published, {here})")
    lora = _int(r, "lora")
    if lora:
        out.append(f"LoRA rank {lora} here, every weight trained there")
    layers = _int(r, "layers")
    if layers:
        out.append(f"{layers} decoder layers built here, the whole model there")
    return out


def own_parallelism(r: Result) -> str:
    """How the record spread the model, worded as the rows word theirs ("FSDP 8", "DDP 2", "one device")."""
    sharding = str(r.params.get("sharding") or "none").lower()
    n = devices(r)
    if sharding in ("none", "auto") and n == 1:
        return "one device"
    return f"{sharding.upper()} {n}"


def differences(r: Result, ref: Reference, framework: str, caveats: list[str]) -> tuple[str, ...]:
    """What differs between a training record and a tokens/s row without changing the work: the framework, the
    family's caveats, the micro-batch, activation checkpointing, the parallelism and device count, the data, the
    source's own model name. ``framework`` is the record's, as :mod:`.match` words it (with eager or
    torch.compile)."""
    out = [f"{ref.framework} vs {framework}", *caveats]
    batch = r.params.get("batch_size")
    if ref.batch_per_device and str(batch) != ref.batch_per_device:
        out.append(f"micro-batch {ref.batch_per_device} vs {batch} sequences per device")
    checkpointing = str(r.params.get("activation_checkpointing") or "none")
    if not ref.activation_checkpointing:
        out.append(f"activation checkpointing not stated there (here {checkpointing})")
    elif ref.activation_checkpointing != checkpointing:
        out.append(f"{ref.activation_checkpointing} vs {checkpointing} activation checkpointing")
    own, n = own_parallelism(r), devices(r)
    spread = f"{ref.parallelism} published vs {own} here" if ref.parallelism and ref.parallelism != own else ""
    if ref.devices is not None and ref.devices != n:
        count = f"{ref.devices} vs {n} device(s): tokens/s per device compared"
        spread = f"{spread}, {count}" if spread else count
    if spread:
        out.append(spread)
    data = "real" if r.params.get("dataset") or r.params.get("data") == "real" else "synthetic"
    published_data = ref.data.split(" (")[0]
    if published_data != data:
        out.append(f"{published_data} vs {data} data" if published_data != "not stated" else "data not stated there")
    if ref.benchmark and ref.benchmark != ref.model:
        out.append(f"published as {ref.benchmark}")
    return tuple(out)
