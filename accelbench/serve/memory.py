"""Whether a language model fits where it would be built: the bytes a token run holds at its peak (weights at the
served precision, a full batch's KV cache and prefill activations; in accuracy mode FP32's reference before them)
against the device's free memory, and, where it cannot fit on one device, how many and the route across them.

The run (:mod:`accelbench.serve.run`) asks :func:`too_big` before it builds anything, so a preset that would swap
or be killed says so in one line instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import torch_dtype
from accelbench.serve import accuracy
from accelbench.serve.limits import lengths, preset_of
from accelbench.serve.specs import LLMServeParams
from accelbench.workloads.decoder import config_of

if TYPE_CHECKING:
    import torch

    from accelbench.devices.base import DeviceKind
    from accelbench.workloads.decoder import Figures


#: device memory left unplanned beside the weights, KV cache and activations: the kernel modules CUDA loads lazily,
#: cuBLAS workspaces (32 MiB a handle and stream on Hopper) and the allocator's rounding. An allowance, not a
#: measurement (the device's context is already out of the free memory it is taken from)
HEADROOM_BYTES = 2**30
#: vLLM's default share of a GPU's memory (``--gpu-memory-utilization 0.9``): what each device of a tensor-parallel
#: group offers the weights and the KV cache
VLLM_MEMORY_SHARE = 0.9


@dataclass(frozen=True)
class MemoryNeed:
    """What a token run holds on its device at once, phase by phase (bytes): serving (the weights at the served
    precision, a full batch's KV cache and the batch's prefill activations), and in accuracy mode FP32's reference
    before it (made and dropped before the served copy is built: :func:`_prepare`)."""

    weights: int
    cache: int
    prefill: int
    reference: int = 0  # the FP32 reference's phase: two FP32 copies (the reference and its rounded twin), its batch

    @property
    def serving(self) -> int:
        return self.weights + self.cache + self.prefill

    @property
    def peak(self) -> int:
        return max(self.serving, self.reference)


def forward_bytes(config: Any, tokens: int, element: int) -> int:
    """The widest live tensors of one decoder layer's forward over ``tokens`` tokens: the residual stream, its
    normed copy, the queries and the attention's output (4 x hidden), and the MLP's gate, up projection and their
    product (3 x intermediate). Inference keeps no layer's activations for the next, so one layer's is the peak."""
    width: int = 4 * config.hidden_size + 3 * config.intermediate_size
    return tokens * width * element


def memory_need(params: LLMServeParams, model: "Figures", config: Any) -> MemoryNeed:
    """The bytes :func:`too_big` counts. The static and transformers engines prefill a whole batch in one forward
    (the continuous engine less) and keep one position's logits (upcast to FP32 by ``generate``); the FP32
    reference (``accuracy.reference``) generates ``accuracy.greedy``'s batch of prompts with an FP32 KV cache, then
    scores one whole sequence at a time (every position's logits) beside a deep copy of itself rounded."""
    element = torch_dtype(params.effective_precision).itemsize
    prompt_len, out = lengths(params)
    context = prompt_len + out
    weights = model.params * element
    cache = params.batch_size * context * model.kv_bytes_per_token  # counted at the served element
    logits = params.batch_size * config.vocab_size * (element + 4)
    prefill = forward_bytes(config, params.batch_size * prompt_len, element) + logits
    reference = 0
    if params.mode == "accuracy":
        import inspect

        at_once = int(inspect.signature(accuracy.greedy).parameters["batch"].default)  # the prompts it generates
        fp32_cache = model.kv_bytes_per_token * 4 // model.element_bytes
        greedy = at_once * context * fp32_cache + forward_bytes(config, at_once * prompt_len, 4)
        scored = forward_bytes(config, context, 4) + context * config.vocab_size * 4
        reference = 2 * model.params * 4 + max(greedy, scored)
    return MemoryNeed(weights, cache, prefill, reference)


def free_memory(kind: "DeviceKind", device: "torch.device") -> int | None:
    """The device's free memory in bytes, where its kind can read it (CUDA's ``mem_get_info``), else None. Free,
    not total: another process, or this one's own allocations, hold part."""
    return kind.free_memory(device)


def tensor_parallel_size(devices: int, heads: int, kv_heads: int) -> int | None:
    """The smallest tensor-parallel size of at least ``devices`` that vLLM accepts for the model: one that divides
    its attention heads, and its KV heads, or is a multiple of them (vLLM then replicates each KV head); None where
    no size up to the heads does."""
    for size in range(max(devices, 1), heads + 1):
        if heads % size == 0 and (kv_heads % size == 0 if size < kv_heads else size % kv_heads == 0):
            return size
    return None


def too_big(params: LLMServeParams, model: "Figures", device: "torch.device", config: Any = None) -> str | None:
    """Why the preset cannot be served where it would be built, or None: the bytes it holds at its peak
    (:func:`memory_need`) and ``HEADROOM_BYTES`` against the device's free memory (its total where its kind cannot
    read the free; the host's available memory for a CPU). An 8B model in fp32 is 32 GB, and building it on a
    24 GiB machine would swap or be killed rather than say so; a 70B or 405B model needs several GPUs, and
    accelbench serves a language model on one device, so the line says how many and the route across them."""
    import psutil

    config = config if config is not None else config_of(preset_of(params.model), params.scale)
    need = memory_need(params, model, config)
    kind = kind_of(device)
    total = kind.total_memory(device) if kind.accelerator else None
    free = free_memory(kind, device) if kind.accelerator else psutil.virtual_memory().available
    have = free if free is not None else total
    headroom = HEADROOM_BYTES if kind.accelerator else 0
    if have is None or need.peak + headroom <= have:
        return None
    gib = 2**30
    where = kind.record_name(device)
    prompt_len, out = lengths(params)
    what = (
        f"{params.model} ({params.scale}) needs {(need.peak + headroom) / gib:.1f} GiB at its peak: "
        f"{need.weights / gib:.1f} GiB of weights ({params.effective_precision}), {need.cache / gib:.1f} GiB of KV "
        f"cache for {params.batch_size} requests of {prompt_len + out} tokens, {need.prefill / gib:.1f} GiB of "
        "prefill activations"
    )
    if need.reference:
        what += f"; before serving, {need.reference / gib:.1f} GiB for accuracy's FP32 reference and its rounded twin"
    if headroom:
        what += f"; and {headroom / gib:.1f} GiB of headroom (CUDA's lazily loaded kernels, workspaces, the allocator)"
    if not kind.accelerator:
        smaller = "" if params.effective_precision in ("bf16", "fp16") else " or --precision bf16"
        return f"{what}; {where} has {have / gib:.1f} GiB free; use --scale tiny, a smaller preset{smaller}"
    held = f"{where} has {free / gib:.1f} GiB free of {(total or free) / gib:.1f} GiB" if free is not None else (
        f"{where} holds {have / gib:.1f} GiB (its free memory unread)"
    )  # fmt: skip
    if total is not None and need.weights + headroom > total:
        devices = math.ceil((need.weights + need.cache) / (VLLM_MEMORY_SHARE * total))
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        size = tensor_parallel_size(devices, heads, kv_heads)
        route = (
            f"vLLM: --tensor-parallel-size {size}, which divides its {heads} attention heads and {kv_heads} KV heads"
            if size is not None
            else f"no tensor-parallel size divides its {heads} attention heads: add --pipeline-parallel-size"
        )
        return (
            f"{what}; {held}: it needs {size or devices} such devices, and accelbench serves a language model on "
            f"one; serve it across them ({route}) and measure it with --engine endpoint --url URL, or use "
            "--scale tiny or a smaller preset"
        )
    if total is not None and free is not None and need.peak + headroom <= total:
        busy = (total - free) / 2**30
        return f"{what}; {held} ({busy:.1f} GiB in use): free the device, or lower --batch-size or the token lengths"
    if need.reference > need.serving:
        return f"{what}; {held}: accuracy's FP32 reference is the peak; use --scale tiny or a smaller preset"
    return f"{what}; {held}: lower --batch-size or the token lengths"
