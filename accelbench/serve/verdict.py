"""Why LoadGen called a token run INVALID, in plain words with the fix: its detail log's rules broken, and the
run's one-token answers said for what they were in place of LoadGen's bare error about them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.loadgen import logs
from accelbench.loadgen.tail import min_queries

if TYPE_CHECKING:
    from accelbench.results.details import EngineFacts
    from accelbench.serve.specs import LLMServeParams
    from accelbench.serve.sut import TokenSUT


#: LoadGen's words for a request answered in one token in token mode (it has no time per output token)
ONE_TOKEN_ERROR = "Number of tokens need to be greater than 1"


def token_reasons(
    d: dict[str, Any], scenario: str, answered: int = 0, one_token: str | None = None
) -> list[tuple[str, str]]:
    """Why LoadGen called a token run INVALID, each as (the rule broken, the words with the fix). ``answered``: the
    requests the SUT answered (what early stopping judged); ``one_token``: what the run's one-token answers were and
    what to do, said in place of LoadGen's own error about them."""
    reasons: list[tuple[str, str]] = []
    if d.get("result_perf_constraints_met") is False:
        for what, key, limit in (
            ("TTFT", "result_first_token_99.00_percentile_latency_ns", "requested_server_ttft_latency"),
            ("TPOT", "result_time_per_output_token_99.00_percentile_ns", "requested_server_tpot_latency"),
        ):
            got, bound = d.get(key), d.get(limit)
            if got is not None and bound and got > bound:
                words = (
                    f"{what} constraint not met (LoadGen): p99 {what} {got / 1e6:.4g} ms over the {bound / 1e6:g} ms "
                    "limit; lower --target-qps (or --batch-size)"
                )
                reasons.append((logs.TOKEN_LIMITS, words))
        if not reasons:
            words = "LoadGen: performance constraints not met (TTFT or TPOT); lower --target-qps"
            reasons.append((logs.TOKEN_LIMITS, words))
    if d.get("result_min_duration_met") is False:
        fix = "raise --expected-qps" if scenario == "offline" else "raise --target-qps or --duration"
        words = f"min duration not met: LoadGen ran out of planned queries before the minimum duration; {fix}"
        reasons.append((logs.MIN_DURATION, words))
    if d.get("result_min_queries_met") is False:
        words = "min queries not met: LoadGen issued fewer queries than required; run longer"
        reasons.append((logs.MIN_QUERIES, words))
    if d.get("early_stopping_met") is False:
        counted = f"{answered} answered, " if answered else ""
        words = (
            f"too few requests for the p99 TTFT/TPOT ({counted}LoadGen's early stopping needs {min_queries(0.99)} "
            "at the least, none late): run longer (--duration S, or --profile official)"
        )
        reasons.append((logs.EARLY_STOPPING, words))
    for e in d.get("_errors", []):
        if one_token is not None and ONE_TOKEN_ERROR in e:
            reasons.append((logs.LOADGEN_ERROR, one_token))
        else:
            reasons.append((logs.LOADGEN_ERROR, f"LoadGen error: {e}"))
    return reasons or [(logs.UNSAID, "LoadGen reported INVALID (see mlperf_log_detail.txt)")]


def one_token_words(sut: "TokenSUT", params: LLMServeParams, engine: EngineFacts) -> str | None:
    """What a run's one-token answers were and what to do (None where it had none): the server (or the model)
    ended them at its end of sequence after the first token, so they have no time per output token, which LoadGen's
    token mode refuses. The per-request file's rows with one output token are they."""
    if not sut.one_token:
        return None
    if params.allow_eos:
        why, fix = "--allow-eos lets an answer end at the end of sequence", "leave --allow-eos out"
    elif not engine.get("ignore_eos_sent", True):
        why = "the server refused ignore_eos and min_tokens, so the model's end of sequence ends an answer"
        fix = "serve where the server takes min_tokens (vLLM, SGLang), or a model that answers longer"
    else:
        why, fix = "the engine stopped them at one token", "check the engine's answers (the requests file)"
    return (
        f"{sut.one_token} of {sut.samples} requests answered in one token ({why}): no time per output token, "
        f"which LoadGen's token mode refuses (its error: {ONE_TOKEN_ERROR}); {fix}"
    )
