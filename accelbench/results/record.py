"""The one result record every benchmark produces.

Records are plain data: a benchmark returns them, the runner completes the
run-level fields, the store and the run folder persist them, and ``compare`` and
``report`` only ever read them. Each serialised record validates against the JSON
Schema shipped beside this module, so that records made by another accelbench
version or machine can be checked before they are imported.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import uuid
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any, Iterable, Literal

from accelbench import __version__
from accelbench.errors import UsageError
from accelbench.results.details import Details

SCHEMA_VERSION = 3
Status = Literal["ok", "failed", "skipped"]
STATUSES = ("ok", "failed", "skipped")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass(kw_only=True)
class Metric:
    """One figure of a result, with what a reader needs to trust and compare it.

    Fields are keyword-only (a positional ``Metric(x, "s", False, None, None)`` hides which flag
    is which); families build figures with the kit's constructors (:mod:`accelbench.kit.metrics`).
    """

    value: float
    unit: str
    higher_is_better: bool
    ci95: tuple[float, float] | None = None
    n: int | None = None
    stats: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci95"] = list(self.ci95) if self.ci95 is not None else None
        if self.stats is None:
            del d["stats"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Metric":
        ci = d.get("ci95")
        return cls(
            value=d["value"],
            unit=d["unit"],
            higher_is_better=d["higher_is_better"],
            ci95=(ci[0], ci[1]) if ci is not None else None,
            n=d.get("n"),
            stats=d.get("stats"),
        )


#: Every kind of concern a record may carry, and what it says of the figure. A consumer asks for a kind (the set-aside
#: policy of :mod:`accelbench.results.judge`, a report's advice, a rerun's plan); the prose is for the reader only, so
#: the words can change without changing what a record means.
KINDS: dict[str, str] = {
    "invalid": "the benchmark's own verdict is INVALID (LoadGen's rules, an accuracy gate, MLPerf's seed rule)",
    "contended": "other processes or the hypervisor took CPU in the measured window (data: share or steal)",
    "client-limited": "a served endpoint's figures describe its client, not the server",
    "late-issue": "a replay's driver sent requests later than they were due (data: late, max_ms)",
    "lengths-differ": "the requests sent other lengths than asked (data: asked_in, asked_out, mean_in, mean_out, "
    "ignore_eos)",
    "server-lengths": "the server counted other prompt lengths than the run sent (data: sent_in, server_in)",
    "server-clock": "the server's own mean TTFT (its /metrics) is well under the client's over the same requests "
    "(data: apart_ms)",
    "repeated-prompts": "prompts sent repeat: a server's prefix cache served part of the figure (data: hit_rate)",
    "recompiled": "graphs were compiled inside the measured windows (data: graphs, seconds)",
    "noisy": "the samples scatter beyond the noise threshold (data: spread, n)",
    "few-samples": "too few samples for a 95% interval (data: n, needed)",
    "min-reps": "the time budget ran out before --min-reps samples (data: n, wanted)",
    "throttled": "the GPU's clocks were held down (data: limit and share, or reasons)",
    "non-compliant": "the quick profile is shorter than MLPerf's rules",
    "rerun": "earlier runs disagreed with their plan; the reported run is a later one (data: runs)",
    "over-bound": "over accelbench's own latency bound (not LoadGen's verdict)",
    "uninformative": "an accuracy run whose reference cannot decide a verdict",
    "no-verdict": "an accuracy run with nothing to set the bar",
    "stopped-early": "the measurement was cut short (Ctrl-C, a timeout) and is partial",
    "cache-resident": "a memory bandwidth figure partly measures the cache",
    "above-peak": "a figure above 100% of the peak it is divided by: that peak is wrong for this machine (data: pct)",
    "compile-fallback": "a compiled engine hit Dynamo's recompile limit: later shapes ran eager (data: none)",
    "graph-failed": "the CUDA graph replay could not be captured; the eager figures stand",
    "not-converged": "a seed did not reach the target and was dropped as the slowest",
    "no-interval": "the judge's own: a figure with no 95% interval where a test needs one (never stored)",
    "other": "a warning whose producer named no kind (an older record's unrecognised words)",
}


@dataclass(frozen=True)
class Concern:
    """One thing a reader must know before trusting a record's figures: its ``kind`` (one of :data:`KINDS`, what
    code decides by), its ``text`` (the words shown to a reader, also the record's ``warnings``) and ``data``, the
    figures behind it where cheap ({"share": 0.65} for contended), so no consumer parses the words."""

    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def label(self) -> str:
        """The words a table cell names it by: the text before its first colon ('contended', 'few samples')."""
        return self.text.split(":")[0]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "data": dict(self.data)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Concern":
        return cls(str(d["kind"]), str(d["text"]), dict(d.get("data") or {}))


@dataclass
class Result:
    """A benchmark's outcome for one set of parameters, on one machine, in one run."""

    benchmark: str
    params: dict[str, Any]
    status: Status = "ok"
    metrics: dict[str, Metric] = field(default_factory=dict)
    primary_metric: str | None = None
    #: the benchmark's own verdict on its figures (LoadGen's VALID, an accuracy gate, tta's seed rule);
    #: None where the benchmark gives none. An outcome, so never a parameter.
    valid: bool | None = None
    error: str | None = None
    reason: str | None = None
    #: the prose of ``concerns``, in order, for readers and tools that predate them; producers add both at once
    #: (:meth:`concern`, or ``concerns=`` at construction, from which an empty ``warnings`` is filled)
    warnings: list[str] = field(default_factory=list)
    conditions: dict[str, Any] = field(default_factory=dict)
    #: what explains the figures: the common keys (:class:`accelbench.results.details.Details`, read through its
    #: accessors) and the benchmark's own, in its writer's TypedDict that extends Details
    details: Details = field(default_factory=lambda: Details())
    samples: list[float] | None = None
    started_at: str = field(default_factory=now_iso)
    ended_at: str = field(default_factory=now_iso)
    id: str = field(default_factory=new_id)
    run_id: str = ""
    spec_key: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    accelbench_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    #: what a reader must know before trusting the figures, typed (see :class:`Concern`); what code decides by
    concerns: list[Concern] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.concerns and not self.warnings:
            self.warnings = [c.text for c in self.concerns]

    def concern(self, kind: str, text: str, *, first: bool = False, **data: Any) -> Concern:
        """Add a concern and its words to ``warnings`` (at the front with ``first``: what matters most first)."""
        c = Concern(kind, text, data)
        if first:
            self.concerns.insert(0, c)
            self.warnings.insert(0, text)
        else:
            self.concerns.append(c)
            self.warnings.append(text)
        return c

    def set_concerns(self, concerns: Iterable[Concern]) -> None:
        """Replace every concern, the warnings with them."""
        self.concerns = list(concerns)
        self.warnings = [c.text for c in self.concerns]

    def has(self, *kinds: str) -> bool:
        """Whether the record carries a concern of any of ``kinds``."""
        return any(c.kind in kinds for c in self.concerns)

    def of_kind(self, *kinds: str) -> list[Concern]:
        """The record's concerns of any of ``kinds``, in order."""
        return [c for c in self.concerns if c.kind in kinds]

    @classmethod
    def failed(
        cls, benchmark: str, params: dict[str, Any], error: str, *, details: Details | None = None, **fields: Any
    ) -> "Result":
        """The one failed record: a measurement that could not be made (or was made wrong), with why.

        ``details`` what the record keeps of the failure (a request log, a search's trials); ``fields`` the
        record's other fields where the failure has them (``conditions``, ``started_at``).
        A figure that was measured but whose verdict is not valid (LoadGen's INVALID, tta's seed rule) is no
        failure: it is ``ok`` with ``valid=False`` and its reasons as ``invalid`` concerns.
        """
        if not error:
            raise ValueError("a failed record says why")
        return cls(benchmark, params, status="failed", error=error, details=details or Details(), **fields)

    @property
    def primary(self) -> Metric | None:
        if self.primary_metric is None:
            return None
        return self.metrics.get(self.primary_metric)

    @property
    def fingerprint(self) -> str:
        return str(self.system.get("fingerprint", ""))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["metrics"] = {k: m.to_dict() for k, m in self.metrics.items()}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Result":
        from accelbench.results.upgrade import upgrade

        d = upgrade(d, SCHEMA_VERSION)
        d["metrics"] = {k: Metric.from_dict(m) for k, m in d.get("metrics", {}).items()}
        d["concerns"] = [Concern.from_dict(c) for c in d.get("concerns") or []]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def from_json(cls, text: str) -> "Result":
        return cls.from_dict(json.loads(text))


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    schema = json.loads((resources.files("accelbench.results") / "result.schema.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(record: dict[str, Any]) -> list[str]:
    """Every way ``record`` breaks the schema, as readable one-liners (empty when valid)."""
    errors = []
    for err in sorted(_validator().iter_errors(record), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(record)"
        errors.append(f"{where}: {err.message}")
    return errors


def validate(record: dict[str, Any], origin: str = "record") -> None:
    """Raise UsageError naming the first problems if ``record`` does not match the schema."""
    errors = schema_errors(record)
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise UsageError(f"{origin} is not a valid accelbench result: {errors[0]}{more}")
