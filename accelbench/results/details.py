"""The typed part of a record's ``details``: the keys that layers reading every benchmark's records rely on.

Those keys are named here with the shapes the benchmarks write, and the schema (``details.properties``) holds the
same shapes, so a record of another shape is refused where it is stored or imported, not misread later. Every key
is optional; a benchmark's own keys extend :class:`Details` in its writer's TypedDict. A record built in memory is
never checked, so readers use the accessors below, which never return a value of another shape
(docs/record-format.md, The typed details)."""

from __future__ import annotations

from typing import Any, Protocol, TypedDict, cast


class Limits(TypedDict, total=False):
    """The p99 latency limits a language model's serving run was held to, in ms (``None``: none, as in Offline),
    and where they came from (``mlperf.conf llama3_1-8b Server``, ``--ttft-ms and --tpot-ms``). Every token run
    writes all three. A served rate is a figure of its limits: the judge (``unlike limits``), the report's token
    table and latency charts, and reference matching (other limits than MLPerf's are other work) read them.
    :class:`accelbench.serve.limits.Limits` is the run's own, under these names: it writes this (``record()``) and
    reads it back (``from_details()``)."""

    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    source: str
    #: False where the limits only count goodput and judge nothing (a closed loop given no limit); absent: judged
    judged: bool


class ModelIdentity(TypedDict, total=False):
    """The figures of the language model a run served, counted on the model built (``details.model``). The judge
    and reference matching read ``params``: a ``--checkpoint`` folder is the model it holds, whatever preset named
    the run, so two records of other sizes never pair and a record is never held against the preset's published
    rows. The other figures explain the token record's roofline."""

    params: int
    active_params: int
    kv_bytes_per_token: int
    flops_per_token: float
    attention_flops_per_context_token: float
    tied_embeddings: bool
    experts: int
    experts_per_token: int
    expert_params: int
    element_bytes: int
    method: str


class EngineFacts(TypedDict, total=False):
    """The engine that generated a language model's tokens and what it was set to: the keys readers of every engine's
    records use (the report's and reference matching's names of a setup, the KV cache reserved and the most one batch
    held, compile, prefix sharing, ignoring the end of sequence). Each engine extends it with its own keys
    (``StaticFacts``, ``ContinuousFacts``, ``VllmFacts``, ``EndpointFacts``)."""

    engine: str
    served_model: str
    url: str
    device: str
    weights: str
    kv_capacity_tokens: int
    kv_allocated_tokens: int
    compile: bool
    compile_held: bool
    compile_fallback: str
    prefix_sharing: bool
    prefix_caching: bool
    ignore_eos_sent: bool
    #: the model's end-of-sequence token id(s), which MLPerf's TEST06 counts the repeats of at an answer's end
    eos_token_id: int | list[int] | None
    #: how malloc was set for a model-running engine on a CPU (each batch's freed memory kept for the next)
    host_heap: str


class Peak(TypedDict, total=False):
    """The device's peak figure a ``pct_of_peak`` or MFU is taken against, and whether it is a datasheet's or an
    estimate (a CPU's timed clock): the report's roofline and its '(est.)' marks, and the overview's note on
    figures above a peak, read it (``accelbench.kit.metrics.peak_details`` writes all four)."""

    value: float
    unit: str
    source: str
    estimated: bool
    #: a kernel's figure came out above this peak: the peak is wrong for what ran (an ``above-peak`` concern says why)
    below_measured: bool


class Roofline(TypedDict, total=False):
    """A token run's decode bandwidth and prefill FLOPs against the device's peaks; the report's caption names
    where the bandwidth came from (``bandwidth_source``). The other keys are the run's own arithmetic."""

    bandwidth_gbs: float
    bandwidth_source: str
    tflops: float | None
    tflops_source: str | None
    #: how the decode bandwidth utilization and its limit were counted (the requests and KV tokens in flight while
    #: decoding, the bytes a decode step reads, the steps, the span) and, with a FLOPS peak, the prefill's
    requests_in_flight: float
    kv_tokens_in_flight: float
    bytes_per_decode_step: float
    decode_steps: float
    span_seconds: float
    method: str
    prefill_flops: float
    prefill_method: str


class Prompts(TypedDict, total=False):
    """Where a token run's prompts came from (``source``), which file and its hash where one was read, how many
    samples, and the lengths served (``{"mean", "min", "max"}`` tokens): reference matching says them beside its
    ratio and refuses a row that fixed the lengths per request. Each source extends it with its own keys
    (``FilePrompts``, ``MlperfPrompts``, ``TracePrompts``, ``ConversationPrompts``, ``RandomPrompts``)."""

    source: str
    file: str | None
    sha256: str | None
    format: str
    samples: int
    prompt_tokens: dict[str, float]
    output_tokens: dict[str, float]
    #: a conversation replay's think time between an answer and the next turn (ms): the replay's driver reads it of
    #: whichever source it replays
    think_ms: float


class PrefixReuse(TypedDict, total=False):
    """What an ideal prefix cache would have served of the prompts a run sent, in the order sent (blocks of
    ``block_tokens``): the hit rate the run offered a server's cache."""

    requests: int
    prompt_tokens: int
    cached_tokens: int
    hit_rate: float | None
    block_tokens: int
    method: str


class PrefixCache(TypedDict, total=False):
    """A token run's prefix reuse: ``sent`` (:class:`PrefixReuse`) beside ``served``, the server's own count (its
    usage's cached tokens: ``cached_tokens``, ``prompt_tokens``, ``hit_rate``, ``source``) or the words saying it
    reports none."""

    sent: PrefixReuse
    served: dict[str, Any] | str


class RequestLogEntry(TypedDict, total=False):
    """The file a serving run kept of its requests, one a line (``accelbench results requests RUN`` reads it and
    gives every figure again): where it is (``path``; a run folder copied elsewhere: the same name in its logs), its
    rows and the failed ones among them, whether it is gzip-compressed, its size in bytes and its format in words."""

    path: str
    rows: int
    failed: int
    compressed: bool
    bytes: int
    format: str


class TurnRow(TypedDict, total=False):
    """One turn of a conversation run: its requests, their mean prompt (the history so far) and their TTFT."""

    turn: int
    requests: int
    prompt_tokens_mean: float
    ttft_p50_ms: float
    ttft_p99_ms: float


class SteadyWindow(TypedDict, total=False):
    """The part of a closed loop its figures are of (``method`` says how it is found), in seconds from the run's
    start: the warm-up requests before it, the requests answered inside it, the sent ones left out."""

    method: str
    warmup_requests: int
    start_s: float
    end_s: float
    seconds: float
    requests: int
    left_out: int


class ReplayDriver(TypedDict, total=False):
    """accelbench's own driver (not LoadGen) of a replayed source or a closed loop: why, its clock, how many
    requests it sent over ``late_ms`` after they were due; for conversations and closed loops the users in flight
    and their think time; a closed loop's most requests in flight at once and its steady window."""

    name: str
    why: str
    clock: str
    late_ms: float
    late_requests: int
    users: int | None
    think_ms: float
    most_in_flight: int
    steady: SteadyWindow
    #: why a closed loop stopped sending before its plan was done (its requests failing in a row)
    stopped: str


class SweepPoint(TypedDict, total=False):
    """One point of a sweep as its records keep it: its users (``concurrency``) or request rate (``rate``), the
    other None, and ``point`` the one of the axis; its figures (None where the run gave none: an Offline point has no
    TTFT); whether it is VALID and what set it aside (a contended or client-limited run's concern). The report's
    Pareto chart draws them; a sweep recorded before ``point`` was kept names its ``concurrency`` alone."""

    point: float
    concurrency: int | None
    rate: float | None
    tokens_per_second_per_device: float | None
    tokens_per_second_per_user: float | None
    ttft_p90_ms: float | None
    tpot_p50_ms: float | None
    requests_per_second: float | None
    valid: bool | None
    set_aside: list[str]


class Sweep(TypedDict, total=False):
    """One point of a ``--mode sweep`` (each point's record carries the sweep so far): the sweep's ``id``, its
    ``axis`` (``concurrency`` or ``rate``), every point's figures and the points on the Pareto front. The report
    draws the most complete record of each sweep."""

    id: str
    axis: str
    points: list[SweepPoint]
    pareto: list[float]
    planned_points: int
    method: str


class FindPeak(TypedDict, total=False):
    """A ``--mode find-peak`` search: every trial (a served model's: ``value``, the rate or samples per query
    tried, its ``p99_latency_seconds``, ``valid``, ``confirmation``), the peak held (``peak``; a language model's
    ``peak_requests_per_second``; ``None``: none held) and the latency bound; the report draws the trials against
    the bound; a language model's search its ``limits``, and how its screens were judged (``method``)."""

    trials: list[dict[str, Any]]
    peak: float | None
    peak_requests_per_second: float | None
    latency_bound_ms: float | None
    limits: Limits
    precision: float
    search_seconds: float
    method: str


class TtaScore(TypedDict, total=False):
    """A time-to-accuracy run's score over its seeds (MLPerf's olympic mean; ``kept``: the seeds it counts): the
    report says how many seeds reached the target (``converged`` of ``runs``)."""

    runs: int
    converged: int
    time_to_target: float | None
    fastest: float | None
    slowest: float | None
    spread: float | None
    valid: bool
    reason: str
    kept: list[int]


#: MLPerf's accuracy gates an accuracy run was judged by (``"99%"``, ``"99.9%"`` of the FP32 reference's quality;
#: ``"fidelity"`` where a reduced precision's agreement is judged instead), each passed or not. Reference matching
#: names a failed gate, and says where no accuracy was checked. (Keys that are not identifiers: declared this way.)
AccuracyGates = TypedDict("AccuracyGates", {"99%": bool, "99.9%": bool, "fidelity": bool}, total=False)


class Fidelity(TypedDict, total=False):
    """How far a reduced precision's outputs strayed from FP32's on the same weights, in units of the precision's own
    rounding (an image model's accuracy run without labels: :class:`accelbench.infer.fidelity.Fidelity` writes it).
    tune's ranking says it beside a candidate that passed or failed this gate."""

    precision: str
    deviation: float
    rounding: float
    coarser: float
    coarser_bits: int
    headroom: float
    limit: float
    ratio: float
    decided: int
    decided_agreement: float | None
    summary: str


class Details(TypedDict, total=False):
    """The keys of ``Result.details`` that readers of any benchmark's records use (see the module's text); every
    other key a benchmark writes is kept as it is."""

    #: why the benchmark's own verdict is INVALID (``valid`` False), one line each; the report and the judge's
    #: INVALID concern say them
    invalid_reasons: list[str]
    #: why the benchmark gives no verdict on figures it measured (``valid`` None: the client that timed a served
    #: endpoint was late), one line each; the headline says them in place of VALID
    not_judged: list[str]
    #: an accuracy run's gates (:data:`AccuracyGates`), and a reduced precision's agreement where that was judged
    accuracy_gates: AccuracyGates
    fidelity: Fidelity
    #: a language model's serving: the limits, the run's own counts of requests and tokens (the judge's ``unlike
    #: lengths``, reference matching's lengths), LoadGen's Server rate (``None`` in Offline), how the TPOT was timed
    limits: Limits
    requests: int
    input_tokens: int
    output_tokens: int
    target_qps: float | None
    tpot_method: str
    #: a closed loop: the requests its figures count (those answered in its steady window; ``requests`` were sent)
    #: and how its figures were taken; a replay's requests answered (its token counts are theirs)
    measured: int
    answered: int
    figure_method: str
    #: SingleStream, MultiStream: the queries LoadGen issued (energy and cost per query divide by them)
    queries: int
    #: how each derived figure (cost, energy per unit) was computed, by figure name
    derived: dict[str, str]
    engine: EngineFacts
    prompts: Prompts
    #: prefix reuse sent and served; a replayed source's driver, and a conversation run's turns
    prefix_cache: PrefixCache
    driver: ReplayDriver
    turns: list[TurnRow]
    #: the file of the run's requests (``accelbench results requests``)
    request_log: RequestLogEntry
    sweep: Sweep
    roofline: Roofline
    #: a served model's latency bound (Server, MultiStream; ``None`` where none): reference matching compares it
    latency_bound_ms: float | None
    find_peak: FindPeak
    #: what was built: a language model's counted figures, a trained network's definition (``unlike models``:
    #: two versions may build other networks under one name), a kernel's device as the kernel names it
    model: ModelIdentity
    source: str
    device_name: str
    peak: Peak
    #: time to accuracy: the score, each seed's run (its ``curve`` of quality against time), the quality metric
    #: and its target, and any further targets reached together (Mask R-CNN's mask AP)
    score: TtaScore
    seeds: list[dict[str, Any]]
    metric: str
    target: float
    more_targets: dict[str, float]
    #: a record the runner made for a benchmark that could not report (its worker died or timed out): the log
    log: str


class Recorded(Protocol):
    """What the accessors read of a record (:class:`accelbench.results.record.Result`): its details and parameters.
    A protocol, so this module, which the record's own module imports for :class:`Details`, imports nothing back."""

    details: Details
    params: dict[str, Any]


def typed(r: Recorded) -> Details:
    """``r.details`` as readers of every benchmark's records see it: the same dict, not a copy. The shapes are
    those the schema holds a stored or imported record to; a record built in memory is not checked, so a reader that
    cannot trust it uses the accessors below."""
    return r.details


def _dict(value: object) -> dict[str, Any] | None:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def number(value: object) -> float | None:
    """A JSON number as a float (a bool is none), else None: how a reader takes a count, rate or limit from a record
    it cannot trust (one built in memory is not checked against the schema)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def limits_of(r: Recorded) -> Limits | None:
    """The limits a token run was held to, as recorded; None where the record has none (not a token run)."""
    return cast("Limits | None", _dict(r.details.get("limits")))


def held_to(r: Recorded) -> tuple[float | None, float | None] | None:
    """(p99 TTFT ms, p99 TPOT ms) a run was held to; None where it records none (an Offline run: neither)."""
    lim = limits_of(r)
    if lim is None:
        return None
    pair = (number(lim.get("ttft_p99_ms")), number(lim.get("tpot_p99_ms")))
    return None if pair == (None, None) else pair


def token_counts(r: Recorded) -> tuple[float, float, float] | None:
    """The requests a token run's token counts are of, and its prompt and output tokens (its own counts, not its
    flags); None where it lacks any, or counted no request. The requests are those the tokens were summed over:
    a closed loop's in its steady window (``measured``), a replay's answered ones (``answered``: a failed request
    counts no token), else every request (LoadGen's runs answer each)."""
    d = r.details
    read, written = number(d.get("input_tokens")), number(d.get("output_tokens"))
    n = next((x for x in map(number, (d.get("measured"), d.get("answered"), d.get("requests"))) if x), None)
    if n is None or read is None or written is None or n <= 0:
        return None
    return n, read, written


def mean_lengths(r: Recorded) -> tuple[float, float] | None:
    """Mean prompt and output tokens per request, from the run's counts; None where it has none (or counted no
    token either way: nothing to compare)."""
    counts = token_counts(r)
    if counts is None or counts[1] <= 0 or counts[2] <= 0:
        return None
    n, read, written = counts
    return read / n, written / n


def target_qps(r: Recorded) -> float | None:
    """The query rate LoadGen's Server run was sent (``details.target_qps``), where recorded and positive."""
    rate = number(r.details.get("target_qps"))
    return rate if rate is not None and rate > 0 else None


def latency_bound_ms(r: Recorded) -> float | None:
    """The latency bound (ms) a served model's run was held to (Server, MultiStream), where recorded and positive."""
    bound = number(r.details.get("latency_bound_ms"))
    return bound if bound is not None and bound > 0 else None


def model_of(r: Recorded) -> ModelIdentity:
    """The counted figures of the language model served (empty where the record has none)."""
    return cast("ModelIdentity", _dict(r.details.get("model")) or {})


def model_params(r: Recorded) -> float | None:
    """The parameters counted on the model a language-model record served, where positive."""
    n = number(model_of(r).get("params"))
    return n if n is not None and n > 0 else None


def model_source(r: Recorded) -> str | None:
    """The definition a trained network was built from (``details.source``), where recorded."""
    source = r.details.get("source")
    return source if isinstance(source, str) else None


def engine_of(r: Recorded) -> EngineFacts:
    """The engine's facts (empty where the record names none)."""
    return cast("EngineFacts", _dict(r.details.get("engine")) or {})


def served_model(r: Recorded) -> str:
    """The model an endpoint served, as ``--served-model`` named it, else as the server said ('' where neither)."""
    return str(r.params.get("served_model") or engine_of(r).get("served_model") or "")


def invalid_reasons(r: Recorded) -> list[str]:
    """Why the record's verdict is INVALID, one line each (empty where it gives none)."""
    why = r.details.get("invalid_reasons")
    return [str(x) for x in why] if isinstance(why, list) else []


def not_judged(r: Recorded) -> list[str]:
    """Why a record's figures got no verdict (empty: they got one, or the benchmark gives none)."""
    value = r.details.get("not_judged")
    return [str(x) for x in value] if isinstance(value, list) else []


def accuracy_gates(r: Recorded) -> AccuracyGates:
    """The accuracy gates an accuracy run was judged by (empty where none was checked)."""
    return cast("AccuracyGates", _dict(r.details.get("accuracy_gates")) or {})


def peak_of(r: Recorded) -> Peak:
    """The peak a share of peak was taken against (empty where the record has none)."""
    return cast("Peak", _dict(r.details.get("peak")) or {})


def source_of(r: Recorded) -> str:
    """Where a token run's prompts came from (:func:`source_named` of its parameters)."""
    return source_named(r.params)


def source_named(params: dict[str, Any]) -> str:
    """The prompt source a token run's parameters name (``source``; parameters from before sources: ``file`` where
    they read ``--prompts``, else ``random``)."""
    return str(params.get("source") or ("file" if params.get("prompts") else "random"))


def sent_hit_rate(r: Recorded) -> float | None:
    """The prefix-cache hit rate the run's requests offered (``details.prefix_cache.sent``), or None."""
    cache = _dict(r.details.get("prefix_cache"))
    sent = _dict(cache.get("sent")) if cache else None
    rate = sent.get("hit_rate") if sent else None
    return float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None


def request_log_of(r: Recorded) -> RequestLogEntry | None:
    """The file of a serving run's requests, where it kept one (a record made before requests were kept: None)."""
    return cast("RequestLogEntry | None", _dict(r.details.get("request_log")))


def prompts_of(r: Recorded) -> Prompts | None:
    """The prompt file a token run served, where it served one."""
    return cast("Prompts | None", _dict(r.details.get("prompts")))


def sweep_of(r: Recorded) -> Sweep | None:
    """The sweep a record is a point of, where it is one (a sweep has an ``id``)."""
    sweep = _dict(r.details.get("sweep"))
    return cast(Sweep, sweep) if sweep is not None and sweep.get("id") else None


def roofline_of(r: Recorded) -> Roofline | None:
    """A token run's roofline figures, where recorded."""
    return cast("Roofline | None", _dict(r.details.get("roofline")))


def find_peak_of(r: Recorded) -> FindPeak:
    """A find-peak search's trials and peak (empty where the record is no search's)."""
    return cast("FindPeak", _dict(r.details.get("find_peak")) or {})


def score_of(r: Recorded) -> TtaScore:
    """A time-to-accuracy run's score over its seeds (empty where none)."""
    return cast("TtaScore", _dict(r.details.get("score")) or {})


def fidelity_of(r: Recorded) -> Fidelity | None:
    """A reduced precision's agreement with FP32, where the record's accuracy gate judged it."""
    return cast("Fidelity | None", _dict(r.details.get("fidelity")))
