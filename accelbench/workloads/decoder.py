"""Decoder-only language models: the published architectures MLPerf and buyers name, as ``transformers`` configs.

Nothing is downloaded: a preset is a released model's architecture (its ``config.json`` figures) with seeded
random weights, or a local checkpoint folder. ``--scale tiny`` keeps the architecture (attention kind,
grouped-query ratio, experts, sliding windows) and shrinks depth and widths. Every preset states its parameters
(total and active, counted on the meta device), KV-cache bytes and forward FLOPs per token."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.errors import UsageError
from accelbench.workloads.base import ModelInfo, Workload

if TYPE_CHECKING:
    import torch

#: the tiny scale: depth and widths a 2-core CPU generates with in milliseconds a token
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 2048, "max_position_embeddings": 16384}


@dataclass(frozen=True)
class Preset:
    """One released decoder: its ``transformers`` model type and the fields of its published ``config.json``."""

    name: str
    model_type: str  # transformers' config class key: "llama", "mixtral", "gpt_oss"
    config: dict[str, Any]
    source: str  # where the architecture figures come from
    #: the published total parameter count (the model card), which the built model is checked against
    published_params: float
    published_active: float | None = None
    #: the MLPerf Inference benchmark whose limits it is served under (mlperf.conf names), and whether that is
    #: its own benchmark or a borrowed one of the same class
    mlperf: str = ""
    mlperf_own: bool = True
    tiny: dict[str, Any] = field(default_factory=dict)
    #: transformers' attention implementation (gpt-oss's attention sinks are not in SDPA: eager)
    attention: str = "sdpa"

    @property
    def moe(self) -> bool:
        return self.published_active is not None


def _hf(repo: str) -> str:
    return f"config.json of huggingface.co/{repo}"


LLAMA2 = {"rope_theta": 10000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096, "vocab_size": 32000}
LLAMA31 = {
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 131072,
    "vocab_size": 128256,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
GPT_OSS = {
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
    "sliding_window": 128,
    "max_position_embeddings": 131072,
    "rope_theta": 150000.0,
}


def _llama(hidden: int, ffn: int, layers: int, heads: int, kv: int) -> dict[str, Any]:
    return {
        "hidden_size": hidden,
        "intermediate_size": ffn,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
    }


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "llama2-7b", "llama", _llama(4096, 11008, 32, 32, 32) | LLAMA2, _hf("meta-llama/Llama-2-7b-hf"), 6.74e9,
            mlperf="llama2-70b", mlperf_own=False, tiny={"num_attention_heads": 4, "num_key_value_heads": 4},
        ),
        Preset(
            "llama2-70b", "llama", _llama(8192, 28672, 80, 64, 8) | LLAMA2, _hf("meta-llama/Llama-2-70b-hf"), 68.98e9,
            mlperf="llama2-70b", tiny={"num_attention_heads": 8, "num_key_value_heads": 1},
        ),
        Preset(
            "llama3.1-8b", "llama", _llama(4096, 14336, 32, 32, 8) | LLAMA31, _hf("meta-llama/Llama-3.1-8B"), 8.03e9,
            mlperf="llama3_1-8b", tiny={"num_attention_heads": 4, "num_key_value_heads": 1},
        ),
        Preset(
            "llama3.1-70b", "llama", _llama(8192, 28672, 80, 64, 8) | LLAMA31, _hf("meta-llama/Llama-3.1-70B"),
            70.6e9, mlperf="llama2-70b", mlperf_own=False, tiny={"num_attention_heads": 8, "num_key_value_heads": 1},
        ),
        Preset(
            "llama3.1-405b", "llama", _llama(16384, 53248, 126, 128, 8) | LLAMA31, _hf("meta-llama/Llama-3.1-405B"),
            405.9e9, mlperf="llama3_1-405b", tiny={"num_attention_heads": 16, "num_key_value_heads": 1},
        ),
        Preset(
            "mixtral-8x7b", "mixtral",
            _llama(4096, 14336, 32, 32, 8)
            | {"num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000, "rope_theta": 1e6,
               "max_position_embeddings": 32768, "rms_norm_eps": 1e-5},
            _hf("mistralai/Mixtral-8x7B-v0.1"), 46.7e9, 12.9e9, mlperf="mixtral-8x7b",
            tiny={"num_attention_heads": 4, "num_key_value_heads": 1},
        ),
        Preset(
            "gpt-oss-20b", "gpt_oss", GPT_OSS | {"num_hidden_layers": 24, "num_local_experts": 32},
            _hf("openai/gpt-oss-20b"), 20.9e9, 3.6e9, mlperf="gpt-oss-120b", mlperf_own=False, attention="eager",
            tiny={"num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 16, "sliding_window": 16,
                  "max_position_embeddings": 131072},  # YaRN: its published context (RoPE costs no memory)
        ),
        Preset(
            "gpt-oss-120b", "gpt_oss", GPT_OSS | {"num_hidden_layers": 36, "num_local_experts": 128},
            _hf("openai/gpt-oss-120b"), 116.8e9, 5.1e9, mlperf="gpt-oss-120b", attention="eager",
            tiny={"num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 16, "sliding_window": 16,
                  "max_position_embeddings": 131072},  # YaRN: its published context (RoPE costs no memory)
        ),
    )
}  # fmt: skip


def config_of(preset: Preset, scale: str) -> Any:
    """The ``transformers`` config of ``preset`` at ``scale`` (tiny: its shape kept, its size shrunk)."""
    from transformers import AutoConfig

    fields = dict(preset.config)
    if scale == "tiny":
        ratio = fields["intermediate_size"] / fields["hidden_size"]
        fields |= TINY | {"intermediate_size": int(TINY["hidden_size"] * ratio)} | preset.tiny
        fields.pop("head_dim", None) if "head_dim" not in preset.tiny else None
        if preset.moe:  # the experts kept, at most 8 of them: routing is what matters
            fields["num_local_experts"] = min(fields["num_local_experts"], 8)
        if "layer_types" not in fields and preset.model_type == "gpt_oss":
            fields["layer_types"] = ["sliding_attention", "full_attention"] * (TINY["num_hidden_layers"] // 2)
    elif preset.model_type == "gpt_oss":
        layers = fields["num_hidden_layers"]
        fields["layer_types"] = ["sliding_attention", "full_attention"] * (layers // 2)
    return AutoConfig.for_model(preset.model_type, **fields)


@dataclass(frozen=True)
class Figures:
    """What one token costs: parameters, KV-cache bytes and forward FLOPs (method: the built model's tensors)."""

    params: int
    active_params: int
    embedding_params: int
    kv_bytes_per_token: int  # at the serving precision's element size; full-attention layers (an upper bound)
    flops_per_token: float  # forward: 2 x active non-embedding parameters (the matrix multiplies)
    attention_flops_per_context_token: float  # forward, added per token already in the context
    tied_embeddings: bool = False  # the output layer is the embedding table (read whole each step)
    experts: int = 0  # a mixture's experts per layer, and how many each token is routed to
    experts_per_token: int = 0
    expert_params: int = 0  # all experts' parameters, every layer
    element_bytes: int = 2  # of a weight at the serving precision


def figures(config: Any, element_bytes: int = 2) -> Figures:
    """Counted on the model ``transformers`` builds from ``config``, on the meta device (no memory)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = expert = embedding = 0
    for name, p in model.named_parameters():
        total += p.numel()
        if ".experts." in name or name.endswith(".experts") or "experts." in name:
            expert += p.numel()
        if "embed_tokens" in name:
            embedding += p.numel()
    experts = getattr(config, "num_local_experts", 0) or 0
    per_token = getattr(config, "num_experts_per_tok", experts) or experts
    active = total - (expert - expert * per_token // experts if experts else 0)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    layers, kv = config.num_hidden_layers, config.num_key_value_heads
    return Figures(
        params=total,
        active_params=active,
        embedding_params=embedding,
        kv_bytes_per_token=2 * layers * kv * head_dim * element_bytes,
        flops_per_token=2.0 * (active - embedding),
        attention_flops_per_context_token=4.0 * layers * config.num_attention_heads * head_dim,
        tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
        experts=experts,
        experts_per_token=per_token if experts else 0,
        expert_params=expert,
        element_bytes=element_bytes,
    )


def check_checkpoint(folder: Path) -> None:
    """A local Hugging Face checkpoint folder: ``config.json`` of a decoder and its safetensors weights."""
    if not folder.is_dir():
        raise UsageError(
            f"checkpoint {folder} is not a folder: give a save_pretrained folder (config.json, *.safetensors)"
        )
    if not (folder / "config.json").is_file():
        raise UsageError(f"checkpoint {folder} has no config.json: give the folder save_pretrained wrote")
    if not any(folder.glob("*.safetensors")):
        raise UsageError(f"checkpoint {folder} has no *.safetensors weights: save it with save_pretrained")


def load_checkpoint(
    folder: Path, device: "torch.device | str | None" = None, dtype: "torch.dtype | str | None" = None
) -> "torch.nn.Module":
    """The checkpoint's model with its own weights (nothing is downloaded: a local folder only), read straight
    onto ``device`` in ``dtype`` (by default the checkpoint's own element type, as it was saved)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(  # transformers picks the attention
        folder, local_files_only=True, dtype=dtype or "auto", device_map=str(device) if device is not None else None
    )


def to_served(model: "torch.nn.Module", device: "torch.device | str", dtype: "torch.dtype") -> list[str]:
    """``model`` on ``device`` with its parameters in ``dtype``; its floating buffers keep the element type
    transformers gave them, and the names of those left in another type than ``dtype`` are returned.

    ``Module.to(dtype=...)`` would also cast the buffers transformers keeps in FP32, such as RoPE's ``inv_freq``,
    whose bf16 rounding moves the rotation angles by an error the FP32 reference, vLLM and a bare model do not have
    (docs/methodology.md gives its size)."""
    kept = {
        name: buf for name, buf in model.named_buffers(remove_duplicate=False)
        if buf.is_floating_point() and buf.dtype != dtype
    }  # fmt: skip
    model.to(device=device, dtype=dtype)
    for name, buf in kept.items():
        owner, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(owner), leaf, buf.to(device))
    return sorted(kept)


def fp32_buffers(model: "torch.nn.Module") -> list[str]:
    """The buffers of ``model`` held in FP32, for the record of a model served at a rounding precision (RoPE's
    frequencies, as :func:`to_served` keeps them)."""
    import torch

    return sorted(name for name, buf in model.named_buffers(remove_duplicate=False) if buf.dtype == torch.float32)


class Decoder(Workload):
    """A decoder-only language model: served token by token (``infer``), trained on next-token prediction."""

    preset: Preset

    def build(
        self,
        scale: str,
        device: "torch.device | str | None" = None,
        dtype: "torch.dtype | None" = None,
        config: Any = None,
    ) -> "torch.nn.Module":
        """Random weights (seeded: the same in every run on one device), created where they are used and in the
        element type they are used in: an 8B model in bf16 is 16 GB on its device, never 32 GB of fp32 on the
        host first, which is far slower (docs/methodology.md). ``config``: the
        preset's config changed by the caller (a slice of its layers), else the preset's at ``scale``."""
        import torch
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)  # random weights are the same in every run
        config = config if config is not None else config_of(self.preset, scale)
        with torch.device(device or "cpu"):
            model: torch.nn.Module = AutoModelForCausalLM.from_config(
                config, attn_implementation=self.preset.attention, dtype=dtype or torch.float32
            )
        return model

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        vocab = config_of(self.preset, scale).vocab_size
        seq = 128 if scale == "tiny" else 2048
        return torch.randint(0, vocab, (batch_size, seq), device=device)

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        loss: torch.Tensor = model(input_ids=batch, labels=batch).loss
        return loss


def _workload(preset: Preset) -> type[Decoder]:
    kind = "mixture of experts, " if preset.moe else ""
    info = ModelInfo(
        name=preset.name,
        domain="generation",
        sample_unit="tokens",
        input_shape="(batch, prompt tokens) -> streamed output tokens",
        default_batch={"gpu": 64, "cpu": 8},
        source=preset.source,
        description=f"{kind}decoder-only transformer ({preset.model_type})",
        serving="tokens",
    )
    return type(preset.name.replace("-", "_").replace(".", "_"), (Decoder,), {"preset": preset, "info": info})


WORKLOADS: dict[str, type[Decoder]] = {name: _workload(p) for name, p in PRESETS.items()}
globals().update({cls.__name__: cls for cls in WORKLOADS.values()})  # "accelbench.workloads.decoder:llama3_1_8b"


def preset_of(model: str) -> Preset:
    """The preset of the decoder ``model`` names (a built-in one, an installed package's or a user's
    ``package.module:Class``): :func:`accelbench.workloads.workload_class` promises a Workload, a decoder's class
    carries its preset."""
    from accelbench.workloads import workload_class

    decoder = workload_class(model)
    if not issubclass(decoder, Decoder):
        raise UsageError(f"{model!r} is not a decoder (a language model): see 'accelbench list --models'")
    return decoder.preset
