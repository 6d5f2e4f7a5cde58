"""Export records (JSON, CSV, Markdown) and import another machine's run folder, idempotently."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError
from accelbench.results.describe import Describe, plain
from accelbench.results.record import SCHEMA_VERSION, Metric, Result, now_iso, validate
from accelbench.results.store import RunInfo, Store
from accelbench.results.upgrade import upgrade

FORMATS = ("json", "csv", "md")


def to_json(results: list[Result], runs: list[RunInfo] | None = None) -> str:
    """The records and the runs they came from (the command line, the suite, the run's tags): an import on
    another machine keeps what a run folder would."""
    doc = {"records": [r.to_dict() for r in results], "runs": [dataclasses.asdict(run) for run in runs or []]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


#: the tidy CSV: one row per figure, the columns a spreadsheet user looks for first
CSV_COLUMNS = (
    "run_id",
    "started_at",
    "system",
    "benchmark",
    "workload",
    "status",
    "valid",
    "metric",
    "value",
    "unit",
    "ci95_low",
    "ci95_high",
    "n",
    "primary",
    "tags",
    "warnings",
    "error_or_reason",
    "params",
    "id",
)


def to_csv(results: list[Result], describe: Describe = plain) -> str:
    """Long ("tidy") form: one row per record and metric, never a column per parameter or metric.

    A record without figures (failed, skipped) is one row with its error or reason; ``params`` keeps every
    parameter as JSON for whoever needs more than the workload's name.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in results:
        common = {
            "run_id": r.run_id,
            "started_at": r.started_at,
            "system": r.fingerprint,
            "benchmark": r.benchmark,
            "workload": describe(r.benchmark, r.params),
            "status": r.status,
            "valid": _cell(r.valid),
            "tags": ";".join(f"{k}={v}" for k, v in sorted(r.tags.items())),
            "warnings": " | ".join(r.warnings),
            "error_or_reason": r.error or r.reason or "",
            "params": json.dumps(r.params, sort_keys=True),
            "id": r.id,
        }
        figures: list[tuple[str, Metric | None]]
        figures = sorted(r.metrics.items(), key=lambda kv: (kv[0] != r.primary_metric, kv[0])) or [("", None)]
        for name, m in figures:
            row = common | {"metric": name, "primary": name == r.primary_metric if name else ""}
            if m is not None:
                lo, hi = m.ci95 if m.ci95 else ("", "")
                row |= {"value": m.value, "unit": m.unit, "ci95_low": lo, "ci95_high": hi, "n": _cell(m.n)}
            w.writerow([row.get(c, "") for c in CSV_COLUMNS])
    return buf.getvalue()


def _cell(v: Any) -> Any:
    return "" if v is None else v


def to_markdown(results: list[Result], describe: Describe = plain) -> str:
    from accelbench.results import format as fmt

    lines = [
        "| benchmark | workload | device | status | verdict | result | 95% CI | system | warnings |",
        "| --- | --- | --- | --- | --- | ---: | ---: | --- | --- |",
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
            describe(r.benchmark, r.params),
            str(r.params.get("device", "")),
            r.status,
            fmt.verdict_word(r),
            result,
            ci,
            system,
            "; ".join(r.warnings),  # contended, noisy: a figure read without them is read wrong
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def export(results: list[Result], fmt_name: str, describe: Describe = plain, runs: list[RunInfo] | None = None) -> str:
    if fmt_name == "json":
        return to_json(results, runs)
    if fmt_name == "csv":
        return to_csv(results, describe)
    if fmt_name == "md":
        return to_markdown(results, describe)
    raise UsageError(f"unknown export format {fmt_name!r}: use {', '.join(FORMATS)}")


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text (byte {exc.start}); give a results.jsonl or an export") from None


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise UsageError(f"{where}: JSON nested too deeply to be an accelbench record") from None


def _jsonl(path: Path) -> tuple[list[Any], list[str]]:
    """The records of a JSON-lines file; a last line cut short (a copy taken mid-write) is skipped and named."""
    text = _text(path)
    lines = text.split("\n")
    records, notes = [], []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        last = lineno == len(lines)  # no newline after it: the writer had not finished the line
        try:
            records.append(_parse(line, f"{path}:{lineno}"))
        except UsageError:
            if not last:
                raise
            notes.append(f"skipped {path.name} line {lineno}: cut short (an unfinished write)")
    return records, notes


def _read_records(path: Path) -> tuple[list[Any], Path | None, list[str], dict[str, dict[str, Any]]]:
    """The records, the run folder they came from (if any), notes, and the runs an export carried by id."""
    if path.is_dir():
        jsonl = path / "results.jsonl"
        if not jsonl.is_file():
            raise UsageError(f"{path} is not a run folder: it has no results.jsonl")
        records, notes = _jsonl(jsonl)
        return records, path, notes, {}
    if not path.is_file():
        raise UsageError(f"nothing to import at {path}: give a run folder or a results.jsonl / .json file")
    if path.suffix == ".json":
        data = _parse(_text(path), str(path))
        runs: dict[str, dict[str, Any]] = {}
        if isinstance(data, dict) and isinstance(data.get("records"), list):  # an export: records and their runs
            runs = {r["run_id"]: r for r in data.get("runs") or [] if isinstance(r, dict) and "run_id" in r}
            data = data["records"]
        if not isinstance(data, list):
            raise UsageError(
                f"{path} should hold records, as 'accelbench results export --format json' writes "
                '({"records": [...], "runs": [...]}, or a list of records)'
            )
        return data, None, [], runs
    records, notes = _jsonl(path)
    return records, path.parent, notes, {}


def import_path(store: Store, path: Path) -> tuple[int, int, list[str]]:
    """Merge records into ``store``; returns (new, already present, what was skipped). All are validated first."""
    records, folder, notes, runs = _read_records(path)
    if not records:
        raise UsageError(f"{path} holds no records")
    for i, rec in enumerate(records, 1):
        if not isinstance(rec, dict):
            raise UsageError(f"{path} record {i} is not a JSON object")
        try:
            records[i - 1] = rec = upgrade(rec, SCHEMA_VERSION)
            validate(rec, f"{path} record {i}")
        except RecursionError:
            raise UsageError(f"{path} record {i}: nested too deeply to be an accelbench record") from None
    results = [Result.from_dict(d) for d in records]
    suite: dict[str, Any] = {"name": "imported", "entries": []}
    if folder is not None and (folder / "suite.json").is_file():
        suite = json.loads((folder / "suite.json").read_text(encoding="utf-8"))
    for run_id in sorted({r.run_id for r in results}):
        first = min((r for r in results if r.run_id == run_id), key=lambda r: r.started_at)
        told = runs.get(run_id) or {}
        told_suite, told_tags = told.get("suite"), told.get("tags")
        store.add_run(
            RunInfo(
                run_id=run_id,
                created_at=str(told.get("created_at") or first.started_at or now_iso()),
                command=str(told.get("command") or f"imported from {path}"),
                suite=told_suite if isinstance(told_suite, dict) else suite,
                fingerprint=first.fingerprint,
                tags=told_tags if isinstance(told_tags, dict) else first.tags,
                run_dir=str(folder.resolve()) if folder is not None else told.get("run_dir"),
            )
        )
    new = store.add_many(results)
    return new, len(results) - new, notes
