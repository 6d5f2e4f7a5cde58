"""Export records (JSON, CSV, Markdown) and import another machine's run folder, idempotently."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError
from accelbench.registry import describe_params
from accelbench.results.record import Result, now_iso, validate
from accelbench.results.store import RunInfo, Store, iter_jsonl

FORMATS = ("json", "csv", "md")


def to_json(results: list[Result]) -> str:
    return json.dumps([r.to_dict() for r in results], indent=2, sort_keys=True) + "\n"


def to_csv(results: list[Result]) -> str:
    """One row per record; params and metric values become ``param.X`` / ``metric.Y`` columns."""
    param_keys = sorted({k for r in results for k in r.params})
    metric_keys = sorted({k for r in results for k in r.metrics})
    head = ["id", "run_id", "benchmark", "status", "fingerprint", "started_at"]
    cols = head + [f"param.{k}" for k in param_keys]
    for k in metric_keys:
        cols += [f"metric.{k}", f"metric.{k}.ci95_low", f"metric.{k}.ci95_high", f"metric.{k}.unit"]
    cols += ["error", "reason", "tags", "warnings"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in results:
        row: list[Any] = [r.id, r.run_id, r.benchmark, r.status, r.fingerprint, r.started_at]
        row += [_cell(r.params.get(k)) for k in param_keys]
        for k in metric_keys:
            m = r.metrics.get(k)
            row += (
                [m.value, m.ci95[0], m.ci95[1], m.unit]
                if m and m.ci95
                else [m.value if m else "", "", "", m.unit if m else ""]
            )
        row += [
            r.error or "",
            r.reason or "",
            ";".join(f"{k}={v}" for k, v in sorted(r.tags.items())),
            " | ".join(r.warnings),
        ]
        w.writerow(row)
    return buf.getvalue()


def _cell(v: Any) -> Any:
    return "" if v is None else v


def to_markdown(results: list[Result]) -> str:
    from accelbench.cli import format as fmt

    lines = [
        "| benchmark | workload | device | status | result | 95% CI | system |",
        "| --- | --- | --- | --- | ---: | ---: | --- |",
    ]
    for r in results:
        m = r.primary
        result = fmt.metric(m) if (m and r.status == "ok") else (r.error or r.reason or "")
        ci = fmt.ci_percent(m) if (m and r.status == "ok") else ""
        cpu = r.system.get("profile", {}).get("cpu", {}).get("model", "")
        accs = r.system.get("profile", {}).get("accelerators") or []
        system = accs[0]["name"] if accs else cpu
        cells = [
            r.benchmark,
            describe_params(r.benchmark, r.params),
            str(r.params.get("device", "")),
            r.status,
            result,
            ci,
            system,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def export(results: list[Result], fmt_name: str) -> str:
    if fmt_name == "json":
        return to_json(results)
    if fmt_name == "csv":
        return to_csv(results)
    if fmt_name == "md":
        return to_markdown(results)
    raise UsageError(f"unknown export format {fmt_name!r}: use {', '.join(FORMATS)}")


def _read_records(path: Path) -> tuple[list[dict[str, Any]], Path | None]:
    if path.is_dir():
        jsonl = path / "results.jsonl"
        if not jsonl.is_file():
            raise UsageError(f"{path} is not a run folder: it has no results.jsonl")
        return list(iter_jsonl(jsonl)), path
    if not path.is_file():
        raise UsageError(f"nothing to import at {path}: give a run folder or a results.jsonl / .json file")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path} is not JSON ({exc.msg})") from None
        if not isinstance(data, list):
            raise UsageError(
                f"{path} should hold a list of records, as 'accelbench results export --format json' writes"
            )
        return data, None
    return list(iter_jsonl(path)), path.parent


def import_path(store: Store, path: Path) -> tuple[int, int]:
    """Merge records into ``store``; returns (new, already present). All are validated first."""
    records, folder = _read_records(path)
    if not records:
        raise UsageError(f"{path} holds no records")
    for i, rec in enumerate(records, 1):
        validate(rec, f"{path} record {i}")
    results = [Result.from_dict(d) for d in records]
    suite: dict[str, Any] = {"name": "imported", "entries": []}
    if folder is not None and (folder / "suite.json").is_file():
        suite = json.loads((folder / "suite.json").read_text(encoding="utf-8"))
    for run_id in sorted({r.run_id for r in results}):
        first = min((r for r in results if r.run_id == run_id), key=lambda r: r.started_at)
        store.add_run(
            RunInfo(
                run_id=run_id,
                created_at=first.started_at or now_iso(),
                command=f"imported from {path}",
                suite=suite,
                fingerprint=first.fingerprint,
                tags=first.tags,
                run_dir=str(folder.resolve()) if folder is not None else None,
            )
        )
    new = store.add_many(results)
    return new, len(results) - new
