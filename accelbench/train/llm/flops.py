"""Model FLOPs per trained token, the numerator of MFU, by the published convention.

torchtitan's (after PaLM's appendix B): 6 x N (the non-embedding matmul parameters, a mixture of experts' active
ones) + 6 x layers x heads x (qk + v head dim) x context, which does not halve attention for the causal mask as
Megatron and MaxText do; both are computed (``mfu``, ``mfu_causal``) and the record names them. LoRA's frozen
matmuls count 4 x (no weight gradients). Parameters are counted on the model built on the meta device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONVENTION = (
    "6 x non-embedding matmul parameters (active experts only) + 6 x layers x heads x (qk + v head dim) x "
    "context per token (torchtitan's); mfu: context = the sequence (attention not halved for the causal mask), "
    "mfu_causal: half of it (Megatron, MaxText)"
)


@dataclass(frozen=True)
class TrainFlops:
    """What one trained token costs, from the architecture and the sequence length."""

    matmul_params: int  # non-embedding, >= 2-D weights, active experts only
    frozen_params: int  # of those, frozen (LoRA's base): no weight gradients
    layers: int
    heads: int
    qk_head_dim: int
    v_head_dim: int
    seq_len: int
    #: per layer, the sliding window it attends within (0: the whole sequence)
    windows: tuple[int, ...] = ()

    def context(self, causal: bool) -> float:
        """Tokens attended to per token, summed over layers: the sequence (or window), halved when causal."""
        total = 0.0
        for w in self.windows or (0,) * self.layers:
            if not causal:
                total += min(w, self.seq_len) if w else self.seq_len
            elif w and w < self.seq_len:  # the exact causal mean of min(position + 1, window)
                total += (w * (w + 1) / 2 + (self.seq_len - w) * w) / self.seq_len
            else:
                total += self.seq_len / 2
        return total

    def per_token(self, causal: bool = False) -> float:
        trained = self.matmul_params - self.frozen_params
        dense = 6.0 * trained + 4.0 * self.frozen_params
        return dense + 6.0 * self.heads * (self.qk_head_dim + self.v_head_dim) * self.context(causal)

    def to_dict(self) -> dict[str, Any]:
        return {
            "matmul_params": self.matmul_params,
            "frozen_params": self.frozen_params,
            "layers": self.layers,
            "heads": self.heads,
            "qk_head_dim": self.qk_head_dim,
            "v_head_dim": self.v_head_dim,
            "seq_len": self.seq_len,
            "per_token": self.per_token(False),
            "per_token_causal": self.per_token(True),
            "convention": CONVENTION
            + ("; LoRA: 4 x the frozen matmul parameters (no weight gradients)" if self.frozen_params else ""),
        }


def matmul_params(model: Any, config: Any) -> int:
    """Non-embedding weights of two or more dimensions (the matmuls, the output projection included), counting
    of each expert tensor only the share a token routes through."""
    experts = int(getattr(config, "num_local_experts", 0) or 0)
    routed = int(getattr(config, "num_experts_per_tok", experts) or experts)
    total = 0.0
    for name, p in model.named_parameters():
        base = name.replace("base_layer.", "")
        if p.dim() < 2 or "embed_tokens" in base or "lora_" in base:
            continue
        share = routed / experts if experts and "experts" in base else 1.0
        total += p.numel() * share
    return int(total)


def of_config(config: Any, seq_len: int, frozen: int = 0, model: Any = None) -> TrainFlops:
    """The FLOPs of ``config`` at ``seq_len``; ``model`` the built one (else built on the meta device)."""
    if model is None:
        import torch
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    window = int(getattr(config, "sliding_window", 0) or 0)
    types = getattr(config, "layer_types", None)
    windows = tuple(window if t == "sliding_attention" else 0 for t in types) if types and window else ()
    return TrainFlops(
        matmul_params=matmul_params(model, config),
        frozen_params=frozen,
        layers=int(config.num_hidden_layers),
        heads=int(config.num_attention_heads),
        qk_head_dim=int(head_dim),
        v_head_dim=int(head_dim),
        seq_len=seq_len,
        windows=windows[: int(config.num_hidden_layers)],
    )
