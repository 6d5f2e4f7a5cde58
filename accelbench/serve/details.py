"""What a language model's serving record keeps beside its figures, declared where it is written: the wing's own
keys (:class:`ServingDetails`, beyond the common ones of :class:`accelbench.results.details.Details`) and the
model's identity as the record states it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, cast

from accelbench.loadgen.record import LoadGenDetails
from accelbench.results.details import ModelIdentity
from accelbench.serve.replay import ReplayDetails

if TYPE_CHECKING:
    from accelbench.results.record import Result
    from accelbench.workloads.decoder import Figures


class UnmeasuredRequests(TypedDict, total=False):
    """``details.unmeasured_requests``: the requests the engine (a server) was sent that no figure of the record
    counts, by what sent them (:data:`UNMEASURED_WHY`)."""

    preflight: int
    probe: int
    warmup: int
    earlier_tests: int
    why: str


#: what ``details.unmeasured_requests`` counts, as the record says it
UNMEASURED_WHY = (
    "requests the server was sent that no figure here counts, which its own counters (vLLM's /metrics, its log) "
    "include: preflight, the endpoint's check before any load (completion requests; once a call, on its first "
    "record; accelbench infer checks the server as many times again before the run starts); probe, the warm-up "
    "batches and the timed single request that planned the run; warmup, a closed loop's first request per user "
    "(among details.requests, left out of the steady window); earlier_tests, where present, LoadGen's tests before "
    "the reported one (reruns, find-peak's screens) and the probes repeated between them"
)


class ServingDetails(LoadGenDetails, ReplayDetails, total=False):
    """A language model's serving record: LoadGen's keys (its log, verdict, probe, an accuracy run's gate) or
    accelbench's driver's (:class:`accelbench.serve.replay.ReplayDetails`), the common ones of every serving run
    (limits, counts, engine, model, prompts, prefix cache), and the wing's own: where each figure came from and how
    the derived ones were computed, the FP32 buffers served beside rounded weights, how the threads were chosen,
    an accuracy run's token agreement and ROUGE, an endpoint client's own measure of itself, and the requests the
    engine was sent that no figure counts (:class:`UnmeasuredRequests`)."""

    figure_sources: dict[str, str]
    goodput_method: str
    tokens_per_user_method: str
    itl_method: str
    kv_cache_method: str
    token_fidelity: dict[str, Any]
    rouge: dict[str, Any]
    fp32_buffers: list[str]
    threads_method: str
    client: dict[str, Any]
    unmeasured_requests: UnmeasuredRequests


def serving_details(result: Result) -> ServingDetails:
    """A serving record's details as this wing wrote them (the same dict)."""
    return cast(ServingDetails, result.details)


def model_identity(model: "Figures") -> ModelIdentity:
    """What the record keeps of the model served (``details.model``): its figures, counted on the model built."""
    return {
        "params": model.params,
        "active_params": model.active_params,
        "kv_bytes_per_token": model.kv_bytes_per_token,
        "flops_per_token": model.flops_per_token,
        "attention_flops_per_context_token": model.attention_flops_per_context_token,
        "tied_embeddings": model.tied_embeddings,
        "experts": model.experts,
        "experts_per_token": model.experts_per_token,
        "expert_params": model.expert_params,
        "element_bytes": model.element_bytes,
        "method": "parameters counted on the model transformers builds (meta device); FLOPs 2 x active "
        "non-embedding parameters per token plus 4 x layers x heads x head_dim per context token",
    }
