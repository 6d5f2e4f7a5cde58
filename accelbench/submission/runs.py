"""The runs a submission tree is made from: each stored record with its run folder and what its suite asked, and
what a record itself says of its logs, its weights and why it is not for submission.

Read apart from the choosing (plan.py) so that the CLI can gather records from a store or from run folders, and the
writers can ask a record the same questions, without either knowing how the plan picks among them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from accelbench.errors import UsageError
from accelbench.loadgen.logs import read_detail
from accelbench.loadgen.mlcommons import SCENARIO_DIRS
from accelbench.results.record import Result
from accelbench.submission.output import DETAIL, redact

#: the concerns that make a record not for submission (the others, contended among them, are said beside it)
_BLOCKING = ("non-compliant", "invalid", "uninformative", "no-verdict")


@dataclass
class Source:
    """One record and the run it came from: where its run folder is and the command that made the run."""

    record: Result
    run_dir: Path | None
    run_command: str = ""
    #: the run's suite.json entries (what was asked, before accelbench resolved it), where the folder has them
    asked: list[dict[str, Any]] = field(default_factory=list)

    @property
    def params(self) -> dict[str, Any]:
        return self.record.params

    @property
    def details(self) -> Mapping[str, Any]:
        return self.record.details

    @property
    def mode(self) -> str:
        return str(self.params.get("mode") or "performance")

    @property
    def audit(self) -> str:
        return str(self.details.get("audit") or self.params.get("audit") or "")

    @property
    def scenario(self) -> str:
        return SCENARIO_DIRS.get(str(self.params.get("scenario")), "")

    @property
    def short(self) -> str:
        return f"{self.record.run_id} ({self.record.id[:8]})"

    def log_dir(self) -> Path:
        """The record's LoadGen log folder: where the record says, else where its run folder holds it now."""
        said = str(self.details.get("loadgen_log_dir") or "")
        tried = []
        if said:
            tried.append(Path(said))
            if self.run_dir is not None:
                tried.append(self.run_dir / "logs" / Path(said).name)
        for folder in tried:
            if (folder / DETAIL).is_file():
                return folder
        where = f" ({', '.join(redact(str(t)) for t in tried)})" if tried else ""
        raise UsageError(
            f"record {self.short} ({_what(self)}) has no LoadGen log folder on disk{where}: "
            "copy its run folder back, or leave the run out"
        )

    def detail(self) -> dict[str, Any]:
        path = self.log_dir() / DETAIL
        try:
            return read_detail(path)
        except OSError as exc:
            raise UsageError(f"cannot read {redact(str(path))}: {exc.strerror or exc}") from None


def read_run_folder(folder: Path) -> list[Source]:
    """The records of a run folder (``results.jsonl``), each with the folder and what its suite asked."""
    path = folder / "results.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        records = [Result.from_json(line) for line in lines if line.strip()]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    return [Source(r, folder, "", asked_of(folder)) for r in records]


def asked_of(folder: Path | None) -> list[dict[str, Any]]:
    """A run folder's suite entries (benchmark and the parameters asked), [] where it has none."""
    if folder is None:
        return []
    try:
        suite = json.loads((folder / "suite.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = suite.get("entries") if isinstance(suite, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _what(s: Source) -> str:
    audit = f" {s.audit}" if s.audit else ""
    return f"{s.params.get('model')} {s.params.get('scenario')} {s.mode}{audit}"


def record_reasons(s: Source) -> tuple[list[str], list[str]]:
    """Why a record is not for submission (its non-compliance, its INVALID reasons) and its other concerns."""
    blocking = [str(x) for x in s.details.get("not_compliant") or []]
    concerns: list[str] = []
    for c in s.record.concerns:
        text = c.text
        if c.kind == "non-compliant":
            said = text.split(":", 1)[1].strip() if ":" in text else text
            if not any(part.strip() in blocking for part in said.split(";")):
                blocking.append(said)
        elif c.kind in _BLOCKING:
            blocking.append(text)
        else:
            concerns.append(text)
    return blocking, concerns


def record_weights(s: Source) -> str:
    """The weights one record served: its checkpoint's file name, else what it says of them, else random."""
    checkpoint = str(s.params.get("checkpoint") or "")
    if checkpoint:
        return Path(checkpoint).name
    return str(s.details.get("weights") or "random (accelbench's default: no --checkpoint)")
