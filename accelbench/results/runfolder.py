"""The run folder: a portable copy of a run that another machine can import.

``<out>/<run_id>/results.jsonl`` gets one line per record, flushed and fsynced as
each record is committed; ``system.json`` and ``suite.json`` describe the
machine and what was asked; ``logs/`` holds each benchmark's output.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError
from accelbench.results.record import Result

DEFAULT_OUT = Path("accelbench-runs")


class RunFolder:
    def __init__(self, out_dir: str | Path, run_id: str) -> None:
        self.path = Path(out_dir) / run_id
        try:
            (self.path / "logs").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create run folder {self.path}: {exc.strerror}; pass --out DIR") from None

    @property
    def results_path(self) -> Path:
        return self.path / "results.jsonl"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    def write_json(self, name: str, data: Any) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.path / name)

    def append(self, result: Result) -> None:
        with self.results_path.open("a", encoding="utf-8") as f:
            f.write(result.to_json() + "\n")
            f.flush()
            os.fsync(f.fileno())

    def log_path(self, index: int, label: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9=._-]+", "_", label)[:80]
        return self.logs / f"{index:03d}-{slug}.log"
