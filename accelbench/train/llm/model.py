"""A decoder ready to train on one rank: built, cut to ``--layers``, LoRA'd, fp8'd, checkpointed and sharded.

The order is torchtitan's: the model is built on the meta device (no memory), converted (LoRA adapters,
float8 linears), wrapped for activation checkpointing, then sharded (FSDP2's ``fully_shard`` on each decoder
layer and on the root, or DDP), and only then materialised on the device and initialised, so that no rank ever
holds the whole model unless its strategy says it does. What each rank holds is recorded (:func:`layout`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from accelbench.devices.precision import autocast_dtype, model_dtype
from accelbench.train.llm.specs import sharding_of
from accelbench.workloads.decoder import config_of, preset_of

if TYPE_CHECKING:
    import torch

#: LoRA's target modules: the attention projections, as MLPerf's llama2-70b LoRA reference adapts them
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
#: what selective checkpointing keeps: the outputs of matrix multiplies and attention (the rest is recomputed)
SAVED_OPS = (
    "mm",
    "addmm",
    "bmm",
    "_scaled_mm",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
)


def step_precision(precision: str) -> str:
    """The precision the training step runs under: fp8 is float8 linears inside bf16 autocast (torchao's
    recipe: fp32 master weights, bf16 elsewhere)."""
    return "amp_bf16" if precision == "fp8" else precision


def config_for(params: Any) -> Any:
    """The preset's config at ``--scale``, cut to ``--layers`` decoder layers where asked."""
    config = config_of(preset_of(params.model), params.scale)
    if params.layers:
        config.num_hidden_layers = params.layers
        if getattr(config, "layer_types", None):
            config.layer_types = list(config.layer_types)[: params.layers]
    return config


def decoder_layers(model: Any) -> Any:
    """The decoder layers' ModuleList (a peft model wraps the transformers one)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inner.model.layers


def build(params: Any, config: Any) -> "torch.nn.Module":
    """The model on the meta device, its dtype the precision's (pure bf16/fp16) or fp32 (master weights)."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedModel

    dtype = model_dtype(params.precision) if params.precision != "fp8" else None
    with torch.device("meta"):
        model: PreTrainedModel = AutoModelForCausalLM.from_config(
            config, attn_implementation=preset_of(params.model).attention, dtype=dtype or torch.float32
        )
    model.config.use_cache = False
    return model


def add_lora(model: Any, params: Any) -> Any:
    """peft's LoRA at ``--lora`` on the attention projections; the base frozen in the 16-bit type of the
    precision (fp32 stays fp32), the adapters in fp32 under autocast (peft's default)."""
    import torch
    from peft import LoraConfig, get_peft_model

    half = autocast_dtype(params.precision) or model_dtype(params.precision)
    if half is not None and half != torch.float32:
        model = model.to(half)
    config = LoraConfig(r=params.lora, lora_alpha=2 * params.lora, lora_dropout=0.0, target_modules=list(LORA_TARGETS))
    return get_peft_model(model, config)


def add_float8(model: Any) -> None:
    """torchao's float8 training on every linear whose shape its kernels take (dims multiples of 16), the output
    projection kept in bf16 (torchtitan's default)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    def wanted(module: Any, fqn: str) -> bool:
        return "lm_head" not in fqn and module.in_features % 16 == 0 and module.out_features % 16 == 0

    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True)
    convert_to_float8_training(model, config=config, module_filter_fn=wanted)


def _selective_policy() -> Any:
    import torch
    from torch.utils.checkpoint import CheckpointPolicy

    saved = {getattr(torch.ops.aten, name).default for name in SAVED_OPS if hasattr(torch.ops.aten, name)}

    def policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
        return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def add_checkpointing(model: Any, mode: str) -> None:
    """Wrap each decoder layer so its activations are recomputed in the backward pass (all, or all but the
    matmul and attention outputs), before sharding (so FSDP's gathers stay outside the recomputed region)."""
    if mode == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    kwargs: dict[str, Any] = {"checkpoint_impl": CheckpointImpl.NO_REENTRANT, "preserve_rng_state": False}
    if mode == "selective":
        kwargs["context_fn"] = functools.partial(create_selective_checkpoint_contexts, _selective_policy())
    layers = decoder_layers(model)
    for i, layer in enumerate(layers):
        layers[i] = checkpoint_wrapper(layer, **kwargs)


def shard(model: Any, params: Any, device: "torch.device") -> Any:
    """FSDP2 on each decoder layer and the root (parameters, gradients and optimizer state split over the ranks;
    an amp precision all-gathers in its 16-bit type and reduces in fp32), DDP, or nothing on one device."""
    strategy = sharding_of(params)
    if strategy == "fsdp":
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        half = autocast_dtype(step_precision(params.precision))
        mp = MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32) if half else MixedPrecisionPolicy()
        for layer in decoder_layers(model):
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
    return model


def materialise(model: Any, params: Any, device: "torch.device", seed: int) -> Any:
    """Allocate the (sharded) parameters on the device and initialise them as transformers does (the rotary
    tables included); then DDP where asked, which needs real tensors to broadcast."""
    import torch

    torch.manual_seed(seed)
    model.to_empty(device=device)
    with torch.no_grad():
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        inner.init_weights()
        if params.lora:  # init_weights draws the adapters' B too: LoRA starts at the base model's output
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.zero_()
    model.train()
    if sharding_of(params) == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        from accelbench.train.ddp_rank import device_ids

        model = DistributedDataParallel(model, device_ids=device_ids(device))
    return model


def prepare(params: Any, config: Any, device: "torch.device", seed: int) -> Any:
    """Every step above, in torchtitan's order."""
    model = build(params, config)
    if params.lora:
        model = add_lora(model, params)
    else:
        model.requires_grad_(True)
    if params.precision == "fp8":
        add_float8(model)
    add_checkpointing(model, params.activation_checkpointing)
    model = shard(model, params, device)
    return materialise(model, params, device, seed)


def layout(model: Any, params: Any, world: int) -> dict[str, Any]:
    """What each rank holds: the strategy, its mesh, and the parameters (total, trainable, on this rank)."""
    local = trainable = total = 0
    for p in model.parameters():
        full = p.numel()
        mine = p.to_local().numel() if hasattr(p, "to_local") else full
        total += full
        local += mine
        trainable += full if p.requires_grad else 0
    strategy = sharding_of(params)
    mesh = {"fsdp": f"1-D device mesh of {world} ranks (dp_shard)", "ddp": f"{world} replicas"}.get(
        strategy, "one device"
    )
    return {
        "strategy": strategy,
        "mesh": mesh,
        "params": total,
        "trainable_params": trainable,
        "params_per_rank": local,
        "units": "each decoder layer and the root (fully_shard)" if strategy == "fsdp" else "",
    }
