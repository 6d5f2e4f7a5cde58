"""The record of a token run under LoadGen: its tokens/s and TTFT/TPOT percentiles, its verdict in plain words,
and the SUT's own figures from its rows (goodput, ITL, Offline's TPOT: :mod:`accelbench.serve.figures`); an
accuracy run's; the prefix cache's reuse and a reasoning model's figures. (accelbench's driver's record:
:mod:`accelbench.serve.drive`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from accelbench.kit import metrics as fig
from accelbench.loadgen.record import PERCENTILES, early_stopping_headline, loadgen_record
from accelbench.loadgen.replan import rerun_warning, true_cause
from accelbench.results.details import AccuracyGates, EngineFacts, Roofline, typed
from accelbench.results.record import Metric, Result
from accelbench.serve import figures
from accelbench.serve.details import ServingDetails, model_identity
from accelbench.serve.labels import flag_compile_fallback, flag_lengths
from accelbench.serve.limits import offline_tpot_reason
from accelbench.serve.roofline import utilization
from accelbench.serve.specs import LLMServeParams
from accelbench.serve.verdict import one_token_words, token_reasons

if TYPE_CHECKING:
    from accelbench.loadgen.start import Outcome
    from accelbench.serve.accuracy import TokenAgreement
    from accelbench.serve.engines.base import Engine
    from accelbench.serve.limits import Limits
    from accelbench.serve.roofline import Roof
    from accelbench.serve.sources.base import Work
    from accelbench.serve.sources.prefix import Ledger
    from accelbench.serve.sut import TokenSUT
    from accelbench.workloads.decoder import Figures

POINTS = ("50.00", "90.00", "99.00")


def _m(value: float, unit: str, higher: bool) -> Metric:
    return fig.figure(value, unit, higher_is_better=higher)


#: a Server run's scheduled rate is shown beside its completed one when they differ by more than this
SCHEDULED_APART = 0.01


def first_field(d: dict[str, Any], *fields: str) -> tuple[Any, str | None]:
    """The first of LoadGen's ``fields`` its detail log has, and its name."""
    return next(((d[f], f) for f in fields if d.get(f) is not None), (None, None))


def token_metrics(scenario: str, d: dict[str, Any], devices: int) -> tuple[dict[str, Metric], str]:
    """LoadGen's figures of a token run, and the primary one's name: what was completed, not what LoadGen
    scheduled (a Server run that fell behind completed fewer requests than it was offered)."""
    metrics: dict[str, Metric] = {}
    if scenario == "offline":
        tps, _ = first_field(d, "result_tokens_per_second")
        rps, _ = first_field(d, "result_samples_per_second")
    else:
        tps, _ = first_field(d, "result_completed_tokens_per_second", "result_tokens_per_second")
        rps, _ = first_field(d, "result_completed_samples_per_sec", "result_scheduled_samples_per_sec")
    if tps is not None:
        metrics["tokens_per_second"] = _m(float(tps), "output tokens/s", True)
        metrics["tokens_per_second_per_device"] = _m(float(tps) / devices, "output tokens/s per device", True)
    if rps is not None:
        metrics["requests_per_second"] = _m(float(rps), "requests/s", True)
    if scenario != "offline" and d.get("result_completed_samples_per_sec") is not None:
        metrics["completed_requests_per_second"] = _m(float(d["result_completed_samples_per_sec"]), "requests/s", True)
        scheduled = d.get("result_scheduled_samples_per_sec")
        if scheduled and abs(float(scheduled) - float(rps or 0)) > SCHEDULED_APART * float(scheduled):
            metrics["scheduled_requests_per_second"] = _m(float(scheduled), "requests/s LoadGen scheduled", True)
    for p in POINTS:
        short = p.split(".")[0]
        ttft = d.get(f"result_first_token_{p}_percentile_latency_ns")
        tpot = d.get(f"result_time_per_output_token_{p}_percentile_ns")
        if ttft is not None:
            metrics[f"ttft_p{short}_ms"] = _m(ttft / 1e6, "ms", False)
        if tpot is not None:
            metrics[f"tpot_p{short}_ms"] = _m(tpot / 1e6, "ms", False)
    if "tpot_p50_ms" in metrics and metrics["tpot_p50_ms"].value > 0:
        metrics["tokens_per_second_per_user"] = _m(1000 / metrics["tpot_p50_ms"].value, "tokens/s per user", True)
    for key, label in PERCENTILES:
        if key in d and label.split("_")[1] in ("p50", "p90", "p99"):
            metrics[label] = _m(d[key] / 1e9, "s", False)
    primary = "tokens_per_second"
    if scenario == "singlestream":  # MLPerf's headline: the early-stopping estimate, where LoadGen made one
        estimate = early_stopping_headline(scenario, d)
        if estimate is not None:
            metrics[estimate[0]] = _m(estimate[1], "s", False)
        primary = estimate[0] if estimate is not None else "latency_p90_seconds"
    return metrics, primary


def figure_sources(scenario: str, d: dict[str, Any]) -> dict[str, str]:
    """Which field of LoadGen's detail log each of its figures in the record is."""
    pairs: dict[str, tuple[str, ...]]
    if scenario == "offline":
        pairs = {
            "tokens_per_second": ("result_tokens_per_second",),
            "requests_per_second": ("result_samples_per_second",),
        }
    else:
        pairs = {
            "tokens_per_second": ("result_completed_tokens_per_second", "result_tokens_per_second"),
            "requests_per_second": ("result_completed_samples_per_sec", "result_scheduled_samples_per_sec"),
            "scheduled_requests_per_second": ("result_scheduled_samples_per_sec",),
        }
    out = {name: field for name, fields in pairs.items() if (field := first_field(d, *fields)[1])}
    for p in POINTS:
        short = p.split(".")[0]
        out[f"ttft_p{short}_ms"] = f"result_first_token_{p}_percentile_latency_ns"
        out[f"tpot_p{short}_ms"] = f"result_time_per_output_token_{p}_percentile_ns"
    return {k: f"LoadGen's {v} (mlperf_log_detail.txt)" for k, v in out.items()}


#: the units of the figures a LoadGen run's record takes from the SUT's rows (:data:`figures.SUT_FIGURES`, and
#: in Offline :data:`figures.SUT_OFFLINE_FIGURES`): the unit, and whether higher is better
SUT_UNITS = {
    "goodput_requests_per_second": ("requests/s within limits", True),
    "goodput_tokens_per_second": ("output tokens/s within limits", True),
    "tokens_per_second_per_user": ("tokens/s per user", True),
    **{f"itl_p{p}_ms": ("ms", False) for p in figures.POINTS},
    **{f"tpot_p{p}_ms": ("ms (SUT's clock)", False) for p in figures.POINTS},
}


def sut_figures(values: dict[str, float], names: tuple[str, ...]) -> dict[str, Metric]:
    """The record's figures of ``names`` by the SUT's clock, from its rows' figures (:func:`figures.measure`).

    Goodput counts the requests within both limits over the first issue to the last answer; ITL's tail shows the
    stalls a reader sees (another request's prefill between two decode steps). Offline's TPOT is the SUT's (LoadGen
    gives no token latency there): a request's first to last token over the tokens after the first, without its
    wait for a place among ``--batch-size`` (TTFT is not given: Offline issues every query at once)."""
    return {k: _m(values[k], *SUT_UNITS[k]) for k in names if k in values}


def kv_cache(sut: "TokenSUT", engine: EngineFacts, model: "Figures | None") -> dict[str, Metric]:
    """What the requests held in the KV cache: peak and mean tokens (each request from its first token to its
    completion: prompt plus tokens so far, by the SUT's clock), in GiB where the model's bytes per token are
    known, and the peak as a share of the cache the engine reserved where it says (``kv_capacity_tokens``)."""
    if not sut.kv_peak:
        return {}
    out = {
        "kv_cache_peak_tokens": _m(float(sut.kv_peak), "tokens held at peak", False),
        "kv_cache_mean_tokens": _m(sut.kv_mean, "tokens held on average", False),
    }
    if model is not None:
        out["kv_cache_peak_gib"] = _m(sut.kv_peak * model.kv_bytes_per_token / 2**30, "GiB held at peak", False)
    capacity = engine.get("kv_capacity_tokens")
    if capacity:
        out["kv_cache_peak_occupancy"] = _m(sut.kv_peak / capacity, "of the engine's KV cache", False)
    return out


def token_result(
    params: LLMServeParams,
    record: dict[str, Any],
    outcome: "Outcome",
    probe: dict[str, Any],
    limits: "Limits",
    engine: EngineFacts,
    model: "Figures | None",
    reruns: list[dict[str, Any]] | None = None,
    roof: "Roof | None" = None,
) -> Result:
    d, conditions, outdir, sut = outcome.detail, outcome.conditions, outcome.outdir, outcome.sut
    metrics, primary = token_metrics(params.scenario, d, params.devices_serving)
    served = figures.measure(sut.rows, figures.Load(), limits.ttft_p99_ms, limits.tpot_p99_ms).values
    metrics |= sut_figures(served, figures.SUT_FIGURES) | kv_cache(sut, engine, model)
    limit: Roofline = {}
    if roof is not None and model is not None:
        used, limit = utilization(sut, model, roof)
        metrics |= used
    if params.scenario == "offline":
        metrics |= sut_figures(served, figures.SUT_OFFLINE_FIGURES)
    if sut.tokens and "tokens_per_second" in metrics:  # prompt tokens read per output token written, measured
        total = metrics["tokens_per_second"].value * (1 + sut.input_tokens / sut.tokens)
        metrics["total_tokens_per_second"] = _m(total, "input + output tokens/s", True)
    valid = d.get("result_validity") == "VALID"
    tpot99 = metrics.get("tpot_p99_ms")
    over = offline_tpot_reason(limits, tpot99.value if params.scenario == "offline" and tpot99 else None)
    sources = figure_sources(params.scenario, d)
    details: ServingDetails = {
        "loadgen_log_dir": str(outdir),
        "figure_sources": {k: v for k, v in sources.items() if k in metrics},
        "probe": probe,
        "limits": limits.record(),
        "engine": engine,
        "requests": sut.samples,
        "output_tokens": sut.tokens,
        "input_tokens": sut.input_tokens,
        "loadgen_version": d.get("loadgen_version"),
        "answer_dtype": "int32",  # the token SUT's answers: token ids
        "target_qps": d.get("requested_server_target_qps") if params.scenario != "offline" else None,
        "goodput_method": "requests meeting both limits by the SUT's clock, over first issue to last answer",
        "tokens_per_user_method": "1000 / the median TPOT in ms",
        "tpot_method": "the SUT's clock (LoadGen gives no token latency in Offline)"
        if params.scenario == "offline"
        else "LoadGen's",
        "itl_method": "gaps between consecutive tokens of a request by the SUT's clock (k at once: k equal gaps)",
        "kv_cache_method": "prompt + tokens so far of each request from its first token to its completion, by the "
        "SUT's clock (prefill before the first token and the engine's own slack are not seen)",
    }
    if model is not None:
        details["model"] = model_identity(model)
    if limit:
        details["roofline"] = limit
    if reruns:
        details["reruns"] = reruns
    said = token_reasons(d, params.scenario, sut.samples, one_token_words(sut, params, engine))
    reasons = [] if valid else true_cause(said, reruns or [], conditions)
    if over:  # LoadGen's VALID is of its own rules; the interactivity asked for is another
        reasons, valid = [*reasons, over], False
    if outcome.disturbed:  # VALID by LoadGen's rules, far under its own probe in every rerun
        reasons, valid = [*reasons, f"disturbed: {outcome.disturbed}; rerun on a quiet machine"], False
    result = loadgen_record(params, record, metrics, primary, details, reasons, conditions, valid, d)
    if reruns:
        result.concern("rerun", rerun_warning(reruns), first=True, runs=len(reruns) + 1)
    flag_compile_fallback(result, engine)
    flag_lengths(result, params, sut, engine)
    return result


def token_accuracy_result(
    params: LLMServeParams,
    record: dict[str, Any],
    outcome: "Outcome",
    verdict: "TokenAgreement",
    engine: EngineFacts,
    rouge: dict[str, Any] | None = None,
) -> Result:
    """Accuracy mode's record: the decided tokens kept, the plain agreement figures and, where the prompt file has
    reference answers, ROUGE gated at 99%/99.9% of FP32's (what the gate then judges first)."""
    from accelbench.serve.accuracy import details_of

    d, conditions, outdir = outcome.detail, outcome.conditions, outcome.outdir

    metrics: dict[str, Metric] = {}
    if rouge is not None:
        unit = {"tokens_per_sample": "tokens per sample", "chars_per_sample": "characters per sample"}
        for key, value in rouge["verdict"]["values"].items():
            metrics[key] = _m(value, "ROUGE x 100" if key.startswith("rouge") else unit.get(key, key), True)
        for key, value in rouge["verdict"]["reference"].items():  # what the gate held them to, in their own units
            said = "ROUGE x 100" if key.startswith("rouge") else unit.get(key, key)
            whose = rouge["verdict"].get("source") or "reference"
            whose = "FP32's on the same prompts" if whose == "reference run" else whose
            metrics[f"reference_{key}"] = _m(value, f"{said}, {whose}", True)
    if verdict.decided_agreement is not None:
        metrics["decided_token_agreement"] = _m(verdict.decided_agreement, "share of decided tokens kept", True)
    metrics["sequence_agreement"] = _m(verdict.sequences_equal, "share of answers equal to FP32's", True)
    metrics["position_agreement"] = _m(verdict.positions_equal, "share of tokens equal to FP32's", True)
    primary = next(k for k in ("rougeL", "decided_token_agreement", "sequence_agreement") if k in metrics)
    share = verdict.decided_agreement or 0.0
    why = verdict.informative
    tokens_ok: AccuracyGates = {"99%": share >= 0.99, "99.9%": share >= 0.999}
    gates = tokens_ok
    gate = "greedy tokens against FP32's on these weights, at positions rounding cannot flip; accuracy not verified"
    if rouge is not None:  # the answers' quality decides; the tokens too where they can be judged
        passed = rouge["verdict"]["passed"].items()  # ROUGE's gates, under the record's names ("99%", "99.9%")
        gates = cast(AccuracyGates, {g: ok and (why is not None or bool(tokens_ok.get(g))) for g, ok in passed})
        values = rouge["verdict"]["values"]
        quality = f" (ROUGE-2 {values['rouge2']:.3g} here)" if "rouge2" in values else ""
        gate = (
            "ROUGE against the prompt file's reference answers, at 99%/99.9% of FP32's on the same prompts and "
            f"weights: engine fidelity (the served answers keep FP32's quality), not the answers' quality{quality}"
        )
    details: ServingDetails = {
        "accuracy_gates": gates,
        "gate": gate,
        "accuracy_verified": rouge is not None,
        "verified": "engine fidelity against FP32 on the same weights" if rouge is not None else None,
        "labels": "prompt file's reference answers" if rouge is not None else "fp32-reference",
        "samples": verdict.samples,
        "loadgen_log_dir": str(outdir),
        "loadgen_validity": d.get("result_validity"),
        "engine": engine,
        "token_fidelity": details_of(verdict),
    }
    if rouge is not None:
        details["rouge"] = rouge
    if why and rouge is None:  # no verdict at all rather than a VALID that proves nothing
        details["uninformative"] = why
        result = loadgen_record(params, record, metrics, primary, details, [], conditions, None, d)
        text = f"uninformative: {why}; serve real weights (--checkpoint DIR) for a verdict"
        result.concern("uninformative", text, first=True)
        return result
    reasons = list(rouge["verdict"]["reasons"]) if rouge is not None else []
    if why is None and not verdict.passed:
        reasons.append(f"served tokens leave FP32's where rounding cannot: {verdict.describe()}")
    return loadgen_record(params, record, metrics, primary, details, reasons, conditions, gates["99%"], d)


def endpoint_accuracy_result(
    params: LLMServeParams, record: dict[str, Any], outcome: "Outcome", engine: EngineFacts, rouge: dict[str, Any]
) -> Result:
    """Accuracy mode through an endpoint: ROUGE of the server's answers to the prompt file, gated at 99%/99.9% of
    ``--accuracy-target`` where given; else the scores with no verdict (nothing here sets the bar)."""
    d, conditions, outdir = outcome.detail, outcome.conditions, outcome.outdir
    served = rouge["served"]
    metrics = {key: _m(float(served[key]), "ROUGE x 100", True) for key in ("rouge1", "rouge2", "rougeL", "rougeLsum")}
    if served.get("tokens_per_sample") is not None:
        metrics["tokens_per_sample"] = _m(float(served["tokens_per_sample"]), "tokens per sample", True)
    verdict = rouge["verdict"]
    details: ServingDetails = {
        "accuracy_verified": verdict is not None,
        "labels": "prompt file's reference answers",
        "gate": f"ROUGE at 99%/99.9% of {verdict['source']}" if verdict else "none: no --accuracy-target",
        "loadgen_log_dir": str(outdir),
        "loadgen_validity": d.get("result_validity"),
        "engine": engine,
        "rouge": rouge,
    }
    if verdict is None:
        result = loadgen_record(params, record, metrics, "rougeL", details, [], conditions, None, d)
        result.concern(
            "no-verdict",
            "no verdict: the server's weights have no FP32 run here to set the bar; give --accuracy-target",
            first=True,
        )
        return result
    details["accuracy_gates"] = verdict["passed"]
    reasons = list(verdict["reasons"])
    passed = verdict["passed"]["99%"]
    return loadgen_record(params, record, metrics, "rougeL", details, reasons, conditions, passed, d)


def reasoning_figures(reasoning: Any) -> dict[str, Any]:
    """A reasoning model's figures from what its server said (``details.client.reasoning``): the time to the first
    answer token (after the thinking; LoadGen's TTFT is the first token of either) and the share of the output
    tokens that were reasoning, where the server counted them."""
    if not isinstance(reasoning, dict):
        return {}
    out = {}
    for p in ("p50", "p99"):
        value = reasoning.get(f"first_answer_ms_{p}")
        if isinstance(value, (int, float)):
            out[f"first_answer_{p}_ms"] = fig.figure(
                float(value), "ms to the first answer token", higher_is_better=False
            )
    tokens, completion = reasoning.get("reasoning_tokens"), reasoning.get("completion_tokens")
    if isinstance(tokens, int) and isinstance(completion, int) and completion:
        out["reasoning_share"] = fig.figure(
            tokens / completion, "of the output tokens reasoning", higher_is_better=False
        )
    return out


#: a sent hit rate above this, with no shared prefix asked for, is prompts repeating (LoadGen's library resent)
REPEATS_SHARE = 0.1


def prefix_cache(result: Result, ledger: Ledger, client: dict[str, Any], engine: Engine, work: Work) -> None:
    """What an ideal prefix cache would have served of what was sent, beside what the server says it served; a
    concern where the prompts sent repeat without a shared prefix asked for and a server's cache can serve them."""
    sent = ledger.report()
    served = client.pop("prefix_cache", None) if client else None
    if served is None:
        shares = " shares cached prefix blocks but" if engine.facts.get("prefix_sharing") else ""
        served = f"not reported: the {engine.name} engine{shares} reports no cached tokens"
    typed(result)["prefix_cache"] = {"sent": sent, "served": served}
    rate = sent["hit_rate"] or 0.0
    if rate > 0:
        result.metrics["prefix_reuse_sent"] = fig.figure(
            rate, "of the prompt tokens sent an ideal prefix cache holds", higher_is_better=True
        )
    if isinstance(served, dict) and served.get("hit_rate") is not None:
        result.metrics["prefix_cache_hit_rate"] = fig.figure(
            float(served["hit_rate"]),
            "of the prompt tokens the server served from its prefix cache",
            higher_is_better=True,
        )
    if engine.remote and not work.shares_prefixes and rate > REPEATS_SHARE:
        result.concern(
            "repeated-prompts",
            f"repeated prompts: {rate:.0%} of the prompt tokens sent had been sent before (LoadGen resends its "
            f"library's {len(work.prompts)} samples); a server with a prefix cache served them from it. Give more "
            "samples (--profile official) or random prompts",
            hit_rate=rate,
        )
