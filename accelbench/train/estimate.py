"""How long a training entry takes: the build, the ranks' start, ``--batch-size auto``'s trials, then the warm-up and
measured steps, each its FLOPs (counted as the run counts them) over the target's peak at a stated efficiency, never
under a step's launch floor."""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

from accelbench.kit.estimate import Target, short, summed
from accelbench.train.llm import flops as llm_flops
from accelbench.train.llm import model as llm_model
from accelbench.train.llm.specs import LLMTrainParams, micro_batch, seq_len_of
from accelbench.train.specs import TrainParams
from accelbench.workloads import model_info
from accelbench.workloads.base import batch_class, by_batch_class
from accelbench.workloads.flops import vision_flops

#: a language model's training step, MFU: torchtitan's published llama3.1-8b eager FSDP row (5,762 tokens/s per
#: H100, reference_results.csv) x about 55 GFLOP a token at 8,192 tokens over 989.4 TFLOPS bf16: about 32%
LLM_TRAIN_MFU = 0.32


def _default_batch(model: str, target: Target) -> int:
    """The model's published per-device batch for the device's class (:class:`accelbench.workloads.base.ModelInfo`)."""
    table = by_batch_class(model_info(model).default_batch)
    return table.get(batch_class(target.device)) or max(table.values())


def train(p: TrainParams, target: Target) -> tuple[float, str]:
    """``train/throughput``: the steps at the vision efficiency of the precision."""
    costs = target.costs
    default = _default_batch(p.model, target)
    auto = p.batch_size == "auto"
    batch = (p.max_batch_size or default) if auto else default if p.batch_size == "default" else int(p.batch_size)
    flops = vision_flops(p.model, p.scale, True)
    peak = target.flops(p.precision)

    def step(b: int) -> float:
        compute = flops * b / (peak * costs.vision(p.precision)) if flops and peak else 0.0
        return max(costs.step_floor, compute)

    parts = [("build", costs.model_build)]
    if p.nproc > 1:
        parts.append(("ranks' start", costs.interpreter_start))
    if auto:  # doubling from the model's default to the cap, two steps a trial (the cap assumed to fit)
        start = min(default, batch)
        trials = [start * 2**i for i in range(max(0, math.ceil(math.log2(batch / max(start, 1)))) + 1)]
        parts.append((f"{len(trials)} batch trials", sum(2 * step(min(b, batch)) for b in trials)))
    steps = p.warmup + p.num_batches + 1  # the FLOP-counting step too
    parts.append((f"{steps} steps of {short(step(batch))}", steps * step(batch)))
    return summed(parts)


@functools.lru_cache(maxsize=16)
def _llm_train_flops(model: str, scale: str, layers: int, seq_len: int) -> float:
    """FLOPs per trained token by torchtitan's convention (:mod:`accelbench.train.llm.flops`), on the meta device."""
    config = llm_model.config_for(SimpleNamespace(model=model, scale=scale, layers=layers))
    return llm_flops.of_config(config, seq_len).per_token()


def train_llm(p: LLMTrainParams, target: Target) -> tuple[float, str]:
    """``train/llm``: the steps' tokens at :data:`LLM_TRAIN_MFU`."""
    costs = target.costs
    seq = seq_len_of(p)
    tokens = micro_batch(p) * seq * p.grad_accum
    peak = target.flops(llm_model.step_precision(p.precision))
    per_token = _llm_train_flops(p.model, p.scale, p.layers, seq)
    step = max(costs.step_floor, tokens * per_token / (peak * LLM_TRAIN_MFU) if peak else 0.0)
    parts = [("build", costs.model_build)]
    if p.nproc > 1:
        parts.append(("ranks' start", costs.interpreter_start))
    steps = p.warmup + p.num_batches
    parts.append((f"{steps} steps of {short(step)}", steps * step))
    return summed(parts)
