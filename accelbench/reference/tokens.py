"""A language model's token record beside MLPerf's tokens/s rows: what makes the two the same work, and what else
differs, in the reader's words.

MLPerf's llama2-70b and llama3.1-8b figures are output tokens/s of a whole system serving a fixed data set
(OpenOrca's 24,576 samples, CNN/DailyMail's 13,368) under p99 TTFT/TPOT limits in Server and Interactive. A
record of ``accelbench infer MODEL`` meets them by model and scenario (:mod:`.match` selects the rows); this
module adds what only a token record has. The work differs, and no ratio is given, where the engine runs no model
(``--engine null`` times the harness, not a model) or the Server limits are not MLPerf's (a rate is a figure of
its limits, as a served rate is of its latency bound). Everything else is said beside the ratio: the prompts and
their lengths (tokens/s depends on how long prompts and answers are, and a summary gives only the answers' mean),
the accuracy target MLPerf held the submitter to, the device count (compare per device), the harness.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from accelbench.reference.table import Reference
from accelbench.results.record import Result

#: the published metric of a token row, and the record's metric it is held against (output tokens/s)
METRIC = "tokens_per_second"


def is_tokens(ref: Reference) -> bool:
    """A row of a language model's output tokens/s (MLPerf's "Tokens per second")."""
    return ref.metric == METRIC


def _engine(r: Result) -> Any:
    """The record's engine class, or None for a user's own (``package.module:Class``: not imported to ask) or
    one this version does not know."""
    name = str(r.params.get("engine") or "")
    from accelbench.infer.tokens.engines import ENGINES, engine_class

    return engine_class(name) if name in ENGINES else None


def runs_model(r: Result) -> bool:
    """Whether the record's engine ran a model: the null engine answers at once and measures the harness only.
    A user's own engine is taken to run one."""
    engine = _engine(r)
    return engine is None or engine.runs_model


def remote(r: Result) -> bool:
    """Whether the record's model ran behind an endpoint (its server's, not one accelbench built)."""
    engine = _engine(r)
    return engine is not None and engine.remote


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def served_elsewhere(r: Result) -> str | None:
    """Why an endpoint's served model is not known to be the preset's, or None where its name says it is: the
    preset's own name or its model card's (``meta-llama/Llama-3.1-8B-Instruct`` is llama3.1-8b's)."""
    from accelbench.workloads.decoder import PRESETS

    preset = PRESETS.get(str(r.params.get("model")))
    served = str(r.params.get("served_model") or (r.details.get("engine") or {}).get("served_model") or "")
    if preset is None:
        return None
    card = preset.source.rsplit("/", 1)[-1]
    if served and any(_key(n) in _key(served) for n in (preset.name, card)):
        return None
    return f"served model {served or 'not named'} is not known to be {preset.name} (its name names neither)"


def another_model(r: Result) -> str | None:
    """Why the model served is not the preset's published one: a ``--checkpoint`` folder of another size (its
    parameters, counted on the built model, more than 5% from the model card's), or None."""
    from accelbench.workloads.decoder import PRESETS

    preset = PRESETS.get(str(r.params.get("model")))
    counted = (r.details.get("model") or {}).get("params")
    if preset is None or not r.params.get("checkpoint") or not isinstance(counted, (int, float)):
        return None
    if abs(counted - preset.published_params) <= 0.05 * preset.published_params:
        return None
    return f"another model ({counted:,.3g} parameters; {preset.name} has {preset.published_params:,.3g})"


def _limits(r: Result) -> tuple[float, float] | None:
    """The p99 TTFT and TPOT limits (ms) the record's run was held to, where it says."""
    limits = r.details.get("limits") or {}
    ttft, tpot = limits.get("ttft_p99_ms"), limits.get("tpot_p99_ms")
    return (float(ttft), float(tpot)) if ttft and tpot else None


def _limits_text(ttft: float, tpot: float) -> str:
    return f"{ttft:g}/{tpot:g} ms"


def unlike(r: Result, ref: Reference) -> list[str]:
    """Why a token record and a tokens/s row did different work beyond what every row checks (scale, model,
    precision, scenario, validity: :func:`.match.unlike`): a harness with no model, or other Server limits."""
    out = []
    if remote(r):
        other = served_elsewhere(r)
        if other:
            out.append(other)
    elif not runs_model(r):
        out.append(f"{r.params.get('engine')} engine: no model ran")
    else:
        other = another_model(r)
        if other:
            out.append(other)
    own = _limits(r)
    if ref.ttft_p99_ms is not None and ref.tpot_p99_ms is not None and own is not None:
        if own != (ref.ttft_p99_ms, ref.tpot_p99_ms):
            published = _limits_text(ref.ttft_p99_ms, ref.tpot_p99_ms)
            out.append(f"TTFT/TPOT limits differ ({published} published, {_limits_text(*own)} here)")
    return out


def devices(r: Result) -> int:
    """The devices the record's per-device figure divides by: its own tokens/s over tokens/s per device (an
    endpoint's server devices, or ``--nproc``), else ``nproc``."""
    total, per = r.metrics.get(METRIC), r.metrics.get(f"{METRIC}_per_device")
    if total is not None and per is not None and total.value and per.value:
        return max(1, round(total.value / per.value))
    return int(r.params.get("nproc", 1) or 1)


def per_device(r: Result) -> float | None:
    """The record's output tokens/s per device: its own figure where it has one (it knows what served)."""
    m = r.metrics.get(f"{METRIC}_per_device")
    if m is not None and m.value:
        return m.value
    total = r.metrics.get(METRIC)
    return total.value / devices(r) if total is not None and total.value else None


def _mean(summary: dict[str, Any], key: str) -> float | None:
    value = (summary.get(key) or {}).get("mean")
    return float(value) if value else None


def own_lengths(r: Result) -> str:
    """The prompts this run served and how long prompts and answers were, in a few words."""
    prompts = r.details.get("prompts")
    requests = r.details.get("requests")
    tokens_in, tokens_out = r.details.get("input_tokens"), r.details.get("output_tokens")
    if requests and tokens_in is not None and tokens_out is not None:
        mean_in, mean_out = tokens_in / requests, tokens_out / requests
    elif isinstance(prompts, dict):
        mean_in, mean_out = _mean(prompts, "prompt_tokens"), _mean(prompts, "output_tokens")
    else:
        mean_in, mean_out = r.params.get("input_tokens"), r.params.get("output_tokens")
    what = "random prompts"
    if isinstance(prompts, dict) and prompts.get("file"):
        what = f"prompts from {PurePath(str(prompts['file'])).name} ({prompts.get('samples', '?')} samples)"
    if mean_in and mean_out:
        return f"{what}, {float(mean_in):.0f} in / {float(mean_out):.0f} out tokens per request"
    return what


def published_lengths(ref: Reference) -> str:
    data = ref.data.split(" (")[0]
    per = ref.output_tokens_per_sample
    return f"{data}, {per:.0f} output tokens per sample" if per else data


def differences(r: Result, ref: Reference, framework: str, caveats: list[str]) -> tuple[str, ...]:
    """What differs between a token record and a tokens/s row without changing the work: the harness, the
    family's caveats (a quick LoadGen profile), the prompts and their lengths, the limits where the record keeps
    none, the accuracy target, the device count. ``framework`` is the record's, as :mod:`.match` words it."""
    out = [f"{ref.framework} vs {framework}", *caveats]
    out.append(f"{published_lengths(ref)} published vs {own_lengths(r)} here")
    if ref.ttft_p99_ms is not None and ref.tpot_p99_ms is not None and _limits(r) is None:
        out.append(f"TTFT/TPOT limits not recorded here (published: {_limits_text(ref.ttft_p99_ms, ref.tpot_p99_ms)})")
    if ref.benchmark and not r.details.get("accuracy_gates"):
        out.append(f"MLPerf's {ref.benchmark} accuracy target met there, accuracy not checked in this run")
    own = devices(r)
    if ref.devices is not None and ref.devices != own:
        out.append(f"{ref.devices} vs {own} device(s): compare per device")
    return tuple(out)
