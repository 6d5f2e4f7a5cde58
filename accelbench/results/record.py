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
from typing import Any, Literal

from accelbench import __version__
from accelbench.errors import UsageError

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
    warnings: list[str] = field(default_factory=list)
    conditions: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
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

    @classmethod
    def failed(cls, benchmark: str, params: dict[str, Any], error: str, **fields: Any) -> "Result":
        """The one failed record: a measurement that could not be made (or was made wrong), with why.

        ``fields`` are the record's other fields where the failure has them (``details``, ``conditions``).
        A figure that was measured but whose verdict is not valid (LoadGen's INVALID, tta's seed rule) is no
        failure: it is ``ok`` with ``valid=False`` and its reasons in ``warnings``.
        """
        if not error:
            raise ValueError("a failed record says why")
        return cls(benchmark, params, status="failed", error=error, **fields)

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
