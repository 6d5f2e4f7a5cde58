"""The embedded results store: one SQLite file per user, safe for concurrent writers.

Each record is committed in its own short transaction the moment its benchmark
ends, so a crash, Ctrl-C or OOM later in a suite loses nothing already measured.
WAL journaling plus a generous busy timeout lets two ``accelbench`` processes
write the same store at once.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from accelbench.errors import UsageError
from accelbench.results.record import Result, validate
from accelbench.results.upgrade import split_from

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    command     TEXT NOT NULL,
    suite_json  TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    tags_json   TEXT NOT NULL,
    run_dir     TEXT
);
CREATE TABLE IF NOT EXISTS results (
    id          TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    benchmark   TEXT NOT NULL,
    status      TEXT NOT NULL,
    spec_key    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    record_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    run_id      TEXT NOT NULL,
    spec_key    TEXT NOT NULL,
    status      TEXT NOT NULL,
    PRIMARY KEY (run_id, spec_key)
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
CREATE INDEX IF NOT EXISTS results_bench ON results(benchmark);
"""

BUSY_TIMEOUT_S = 60.0


def default_store_path() -> Path:
    """``$ACCELBENCH_HOME/accelbench.db``, else the XDG data directory."""
    home = os.environ.get("ACCELBENCH_HOME")
    if home:
        return Path(home).expanduser() / "accelbench.db"
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "accelbench" / "accelbench.db"


@dataclass
class RunInfo:
    """A run: one invocation of a suite, possibly resumed later."""

    run_id: str
    created_at: str
    command: str
    suite: dict[str, Any]
    fingerprint: str
    tags: dict[str, str] = field(default_factory=dict)
    run_dir: str | None = None


class Store:
    """Results and runs in SQLite; the only writer of the store file."""

    def __init__(self, path: str | Path | None = None, *, readonly: bool = False) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self.readonly = readonly
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        fix = "pass --db PATH or set ACCELBENCH_HOME to a writable directory"
        if self.path.is_dir():
            raise UsageError(f"results store {self.path} is a directory; {fix}")
        if self.readonly:
            if not self.path.exists():
                raise UsageError(f"no results store at {self.path} yet; run a benchmark first, or pass --db PATH")
            uri = f"file:{self.path}?mode=ro"
            try:
                conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
                conn.execute("SELECT count(*) FROM results").fetchone()
            except sqlite3.DatabaseError as exc:
                if "no such table" in str(exc):
                    raise UsageError(f"no results in {self.path} yet; run a benchmark first") from None
                raise UsageError(f"cannot read results store {self.path}: {exc}") from None
            return conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            with _transaction(conn):
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise UsageError(f"cannot write results store {self.path}: {exc}; {fix}") from None
        return conn

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    def add_run(self, run: RunInfo) -> None:
        with _transaction(self._conn):
            self._conn.execute(
                "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id,
                    run.created_at,
                    run.command,
                    json.dumps(run.suite, sort_keys=True),
                    run.fingerprint,
                    json.dumps(run.tags, sort_keys=True),
                    run.run_dir,
                ),
            )

    def add(self, result: Result) -> bool:
        """Validate and commit one record; False when a record with its id is already stored."""
        return self.add_many([result]) == 1

    def add_many(self, results: Iterable[Result]) -> int:
        rows = []
        for r in results:
            d = r.to_dict()
            validate(d, f"result {r.id}")
            rows.append((r.id, r.run_id, r.benchmark, r.status, r.spec_key, r.fingerprint, r.started_at, r.to_json()))
        with _transaction(self._conn):
            before = self._conn.total_changes
            self._conn.executemany("INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            return self._conn.total_changes - before

    # -- reading ---------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunInfo | None:
        row = self._conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def runs(self) -> list[RunInfo]:
        return [_run(r) for r in self._conn.execute("SELECT * FROM runs ORDER BY created_at")]

    def resolve_run_id(self, text: str) -> str | None:
        """A full run id from any unique part of it: its random suffix (``4c03``) as well as its date prefix.

        Ids in results count even without a run row.
        """
        part = "%" + _like_prefix(text)
        rows = self._conn.execute(
            "SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' "
            "UNION SELECT DISTINCT run_id FROM results WHERE run_id LIKE ? ESCAPE '\\'",
            (part, part),
        ).fetchall()
        ids = sorted({r[0] for r in rows})
        if len(ids) > 1 and text not in ids:
            raise UsageError(f"run id {text!r} matches several runs: {', '.join(ids[:5])}; give more of it")
        if text in ids:
            return text
        return ids[0] if ids else None

    def get(self, id_prefix: str) -> Result:
        rows = self._conn.execute(
            "SELECT record_json FROM results WHERE id LIKE ? ESCAPE '\\' LIMIT 3", (_like_prefix(id_prefix),)
        ).fetchall()
        if not rows:
            raise UsageError(f"no result with id {id_prefix!r}; see 'accelbench results list'")
        if len(rows) > 1:
            raise UsageError(f"result id prefix {id_prefix!r} is ambiguous; give more characters")
        return Result.from_json(rows[0][0])

    def query(
        self,
        *,
        run_id: str | None = None,
        benchmark: str | None = None,
        status: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> list[Result]:
        """Records in the order they were started, filtered; tag filters apply after decoding."""
        sql, args = "SELECT record_json FROM results WHERE 1=1", []
        if run_id:
            sql += " AND run_id = ?"
            args.append(run_id)
        if benchmark:  # a record stored before a benchmark was split off reads as its own (results/upgrade.py)
            older = split_from(benchmark)
            sql += " AND (benchmark = ? OR benchmark LIKE ? ESCAPE '\\'" + " OR benchmark = ?" * len(older) + ")"
            args += [benchmark, _like_prefix(benchmark.rstrip("/") + "/"), *older]
        if status:
            sql += " AND status = ?"
            args.append(status)
        sql += " ORDER BY started_at, rowid"
        out = []
        for (blob,) in self._conn.execute(sql, args):
            r = Result.from_json(blob)
            if tags and any(r.tags.get(k) != v for k, v in tags.items()):
                continue
            if benchmark and r.benchmark != benchmark and not r.benchmark.startswith(benchmark.rstrip("/") + "/"):
                continue  # an older name's record that the upgrade gave another benchmark
            out.append(r)
        return out

    def count(self) -> int:
        n: int = self._conn.execute("SELECT count(*) FROM results").fetchone()[0]
        return n

    def mark_entry(self, run_id: str, spec_key: str, status: str) -> None:
        """Record that a suite entry ran to its end ("ok" or "failed"); an interrupted one is not marked."""
        with _transaction(self._conn):
            self._conn.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", (run_id, spec_key, status))

    def finished_entries(self, run_id: str, include_failed: bool = True) -> set[str]:
        sql = "SELECT spec_key FROM entries WHERE run_id = ?"
        if not include_failed:
            sql += " AND status = 'ok'"
        return {r[0] for r in self._conn.execute(sql, (run_id,))}


class _transaction:
    """BEGIN IMMEDIATE ... COMMIT: takes the write lock up front so writers queue instead of deadlocking."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _run(row: tuple[Any, ...]) -> RunInfo:
    return RunInfo(
        run_id=row[0],
        created_at=row[1],
        command=row[2],
        suite=json.loads(row[3]),
        fingerprint=row[4],
        tags=json.loads(row[5]),
        run_dir=row[6],
    )


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{lineno}: not a JSON line ({exc.msg})") from None


_TAG_RE = re.compile(r"^tag:([A-Za-z0-9_.-]+)=(.+)$")


def select(store: Store, selector: str) -> list[Result]:
    """``tag:KEY=VALUE`` (several joined by commas), or a run id or its unique prefix."""
    m = _TAG_RE.match(selector)
    if m:
        tags = dict(part.split("=", 1) for part in selector[4:].split(",") if "=" in part)
        results = store.query(tags=tags, status="ok")
        if not results:
            raise UsageError(f"no results carry {selector}; see 'accelbench results list' for tags")
        return results
    if selector.startswith("tag:"):
        raise UsageError(f"bad selector {selector!r}: write tag:KEY=VALUE, e.g. tag:gpu=v100")
    run_id = store.resolve_run_id(selector)
    if run_id is None:
        raise UsageError(f"unknown run id {selector!r}; see 'accelbench results runs'")
    return store.query(run_id=run_id, status="ok")
