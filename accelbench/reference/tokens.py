"""A language model's token record beside published tokens/s rows (MLPerf's under p99 TTFT/TPOT limits,
TensorRT-LLM's at maximum load and one fixed prompt/answer length a row): what makes them the same work.

No ratio where the engine runs no model, the Server limits are not MLPerf's (a rate is a figure of its limits),
or a row fixed lengths the record's differ from (prefill and the KV cache grow with the prompt); the prompts, the
accuracy target, the device count and the harness are said beside the ratio (docs/reference.md)."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from accelbench.reference.table import Reference
from accelbench.results.details import accuracy_gates, held_to, model_params, prompts_of, served_model, token_counts
from accelbench.results.record import Result

#: the record's metric a token row is held against (output tokens/s), and MLPerf's published metric of that name
METRIC = "tokens_per_second"
#: the published metrics of a language model's output tokens/s, each with how it was measured where that is not
#: MLPerf LoadGen's (said beside the ratio: the harness differs, the work need not)
PUBLISHED = {
    METRIC: "",  # MLPerf's "Tokens per second" / "Completed tokens per second" of a LoadGen summary
    "total_output_throughput": (
        "trtllm-bench's maximum-throughput run (requests fed at an infinite rate, 'Total Output Throughput'), "
        "not a LoadGen run"
    ),
}


def is_tokens(ref: Reference) -> bool:
    """A row of a language model's output tokens/s (MLPerf's "Tokens per second", TensorRT-LLM's "Total Output
    Throughput")."""
    return ref.metric in PUBLISHED


def _engine(r: Result) -> Any:
    """The record's engine class, or None for a user's own (``package.module:Class``: not imported to ask) or
    one this version does not know."""
    name = str(r.params.get("engine") or "")
    from accelbench.serve.engines.base import ENGINES, engine_class

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
    served = served_model(r)
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
    counted = model_params(r)
    if preset is None or not r.params.get("checkpoint") or counted is None:
        return None
    if abs(counted - preset.published_params) <= 0.05 * preset.published_params:
        return None
    return f"another model ({counted:,.3g} parameters; {preset.name} has {preset.published_params:,.3g})"


def _limits(r: Result) -> tuple[float, float] | None:
    """The p99 TTFT and TPOT limits (ms) the record's run was held to, where it says."""
    pair = held_to(r)
    return (pair[0], pair[1]) if pair is not None and pair[0] and pair[1] else None


def _limits_text(ttft: float, tpot: float) -> str:
    return f"{ttft:g}/{tpot:g} ms"


def _lengths_text(lengths: tuple[float, float]) -> str:
    return f"{lengths[0]:g}/{lengths[1]:g} tokens"


def fixed_lengths(r: Result) -> tuple[float, float] | str:
    """The record's prompt and answer tokens per request where every request had the same (measured: the
    tokens served over the requests, else the flags), or why it cannot say so: a prompt file's lengths vary, and
    ``--input-jitter`` under 1 draws prompts shorter than ``--input-tokens``."""
    prompts = prompts_of(r)
    if prompts is not None and (prompts.get("file") or prompts.get("source") not in (None, "random")):
        name = PurePath(str(prompts.get("file") or prompts.get("source"))).name
        return f"prompts from {name} here, of varying lengths"
    jitter = r.params.get("input_jitter")
    if jitter is not None and float(jitter) < 1:
        return (
            f"prompts drawn {float(jitter):g}..1 x {r.params.get('input_tokens')} tokens long here "
            "(--input-jitter 1 fixes them)"
        )
    counts = token_counts(r)
    if counts is not None:
        requests, tokens_in, tokens_out = counts
        return (round(tokens_in / requests, 1), round(tokens_out / requests, 1))
    flags = r.params.get("input_tokens"), r.params.get("output_tokens")
    if flags[0] and flags[1]:
        return (float(flags[0]), float(flags[1]))
    return "token lengths not recorded here"


def other_lengths(r: Result, ref: Reference) -> str | None:
    """Why the record's prompt/answer lengths are not the ones the row fixed for every request, or None where they
    are (or the row is of a data set, whose lengths :func:`differences` says beside the ratio)."""
    published = ref.lengths
    if published is None:
        return None
    own = fixed_lengths(r)
    if isinstance(own, str):
        return f"token lengths differ ({_lengths_text(published)} each published; {own})"
    if own != (float(published[0]), float(published[1])):
        return f"token lengths differ ({_lengths_text(published)} published, {_lengths_text(own)} here)"
    return None


def unlike(r: Result, ref: Reference) -> list[str]:
    """Why a token record and a tokens/s row did different work beyond what every row checks (scale, model,
    precision, scenario, validity: :func:`.match.unlike`): a harness with no model, other Server limits, or other
    prompt/answer lengths than a row that fixed them."""
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
    lengths = other_lengths(r, ref)
    if lengths:
        out.append(lengths)
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


def _mean(lengths: dict[str, float] | None) -> float | None:
    """The mean of a prompt file's lengths (``{"mean", "min", "max"}``), where it has one."""
    value = (lengths or {}).get("mean")
    return float(value) if value else None


def own_lengths(r: Result) -> str:
    """The prompts this run served and how long prompts and answers were, in a few words."""
    prompts, counts = prompts_of(r), token_counts(r)
    mean_in: float | None
    mean_out: float | None
    if counts is not None:
        mean_in, mean_out = counts[1] / counts[0], counts[2] / counts[0]
    elif prompts is not None:
        mean_in, mean_out = _mean(prompts.get("prompt_tokens")), _mean(prompts.get("output_tokens"))
    else:
        mean_in, mean_out = r.params.get("input_tokens"), r.params.get("output_tokens")
    what = "random prompts"
    if prompts is not None and prompts.get("file"):
        what = f"prompts from {PurePath(str(prompts.get('file'))).name} ({prompts.get('samples', '?')} samples)"
    if mean_in and mean_out:
        return f"{what}, {float(mean_in):.0f} in / {float(mean_out):.0f} out tokens per request"
    return what


def published_lengths(ref: Reference) -> str:
    """The published prompts and their lengths in a few words: fixed per request where the row says so, else the
    answers' mean of a data set."""
    data = ref.data.split(" (")[0]
    if ref.lengths is not None:
        return f"{data}, {ref.lengths[0]} in / {ref.lengths[1]} out tokens per request"
    per = ref.output_tokens_per_sample
    return f"{data}, {per:.0f} output tokens per sample" if per else data


def differences(r: Result, ref: Reference, framework: str, caveats: list[str]) -> tuple[str, ...]:
    """What differs between a token record and a tokens/s row without changing the work: the harness, the
    family's caveats (a quick LoadGen profile), the prompts and their lengths, the limits where the record keeps
    none, the accuracy target, the device count. ``framework`` is the record's, as :mod:`.match` words it."""
    out = [f"{ref.framework} vs {framework}", *caveats]
    if PUBLISHED.get(ref.metric):
        out.append(PUBLISHED[ref.metric])
    out.append(f"{published_lengths(ref)} published vs {own_lengths(r)} here")
    if ref.ttft_p99_ms is not None and ref.tpot_p99_ms is not None and _limits(r) is None:
        out.append(f"TTFT/TPOT limits not recorded here (published: {_limits_text(ref.ttft_p99_ms, ref.tpot_p99_ms)})")
    if ref.benchmark and not accuracy_gates(r):
        out.append(f"MLPerf's {ref.benchmark} accuracy target met there, accuracy not checked in this run")
    own = devices(r)
    if ref.devices is not None and ref.devices != own:
        out.append(f"{ref.devices} vs {own} device(s): compare per device")
    return tuple(out)
