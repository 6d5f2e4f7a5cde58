"""Suites: ordered lists of (benchmark, parameters) entries, built in or from a TOML file of the same format as
``accelbench/suite/builtin/*.toml`` (docs/run.md). A list value expands into one entry per element (several: their
product); ``include`` puts another suite's entries first; ``set`` reads a kernel shape set."""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from accelbench import registry
from accelbench.errors import UsageError
from accelbench.results.upgrade import split_entry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN = ("quick", "headline", "standard", "tpu-vs-gpu")
#: what ``accelbench run`` runs without a target: on a machine without an accelerator, ``quick`` (about a minute on
#: 2 cores); with one, ``headline`` (a buyer's first figures, within 8 minutes on one H100); ``standard``, every
#: DeepBench set and model (391 entries), is the long suite, run when asked for
DEFAULT_CPU, DEFAULT_ACCELERATOR = "quick", "headline"
#: where an entry runs, when a suite file says (``on = "..."``): a suite measures what the machine it runs on is
#: for, so a GPU's quick run does not time the tiny models a 2-core CPU finishes in a minute
TARGETS = ("cpu", "accelerator")


@dataclass(frozen=True)
class Entry:
    """One benchmark with fully validated parameters; the unit the runner isolates."""

    benchmark: str
    params: dict[str, Any]
    timeout: float | None = None
    #: "cpu" or "accelerator": run only where the suite runs on that (None: everywhere)
    on: str | None = None

    @property
    def key(self) -> str:
        """Identifies the entry across a resume: the benchmark and every parameter."""
        blob = json.dumps({"benchmark": self.benchmark, "params": self.params}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        return f"{self.benchmark} {registry.describe_params(self.benchmark, self.params)}".strip()

    def to_dict(self) -> dict[str, Any]:
        out = {"benchmark": self.benchmark, "params": self.params, "timeout": self.timeout}
        return out | ({"on": self.on} if self.on else {})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Entry":
        benchmark, params = split_entry(d["benchmark"], d["params"])  # a run stored before a benchmark's split
        fields = {f.name for f, _ in registry.get(registry.route(benchmark, params)).params.flags()}
        entry = make_entry(benchmark, {k: v for k, v in params.items() if k in fields}, d.get("timeout"))
        return replace(entry, on=d.get("on"))


@dataclass
class Suite:
    name: str
    entries: list[Entry]
    description: str = ""
    source: str = "builtin"
    meta: dict[str, Any] = field(default_factory=dict)

    def keyed_entries(self) -> list[tuple[str, Entry]]:
        """Entries with keys unique within the suite: a repeated entry gets ``#2``, ``#3``..."""
        seen: dict[str, int] = {}
        out = []
        for e in self.entries:
            n = seen[e.key] = seen.get(e.key, 0) + 1
            out.append((e.key if n == 1 else f"{e.key}#{n}", e))
        return out

    def repeated(self, times: int) -> "Suite":
        """Every entry ``times`` times, in rounds (A B C A B C): each run is its own process, pyperf-style, and
        drift over the run hits every entry alike, so the repeats measure the run-to-run spread that one run's
        samples cannot (compare pools them and judges a change against it)."""
        if times <= 1:
            return self
        return Suite(self.name, self.entries * times, self.description, self.source, dict(self.meta, repeat=times))

    def on(self, target: str) -> "Suite":
        """The entries that run where the suite runs on ``target`` ("cpu" or "accelerator"), with how many were left
        out for the other kept in ``meta``."""
        kept = [e for e in self.entries if e.on in (None, target)]
        if len(kept) == len(self.entries):
            return self
        meta = dict(self.meta, target=target, left_out=len(self.entries) - len(kept))
        return Suite(self.name, kept, self.description, self.source, meta)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "entries": [e.to_dict() for e in self.entries],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Suite":
        return cls(
            name=d["name"],
            description=d.get("description", ""),
            source=d.get("source", "stored"),
            entries=[Entry.from_dict(e) for e in d["entries"]],
        )


def make_entry(benchmark: str, params: dict[str, Any], timeout: float | None = None) -> Entry:
    """Validate ``params`` for the benchmark that measures their model (``benchmark`` or the one sharing its
    command: :func:`accelbench.registry.route`) and store them complete (defaults filled in)."""
    benchmark = registry.route(registry.get(benchmark).name, params)
    info = registry.get(benchmark)
    if info.standalone:
        raise UsageError(
            f"{benchmark} is made by its own command ('accelbench {benchmark.split('/')[0]}'), not in a suite"
        )
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise UsageError(f"{benchmark}: timeout must be a positive number of seconds, got {timeout!r}")
    return Entry(benchmark, info.make_params(params).to_dict(), float(timeout) if timeout else None)


def expand(params: dict[str, Any]) -> list[dict[str, Any]]:
    """A dict whose list values are alternatives -> every combination, in file order."""
    keys = list(params)
    choices = [v if isinstance(v, list) else [v] for v in params.values()]
    for key, values in zip(keys, choices, strict=True):
        if not values:
            raise UsageError(f"parameter {key!r} has an empty list of values")
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*choices)]


def parse_suite(doc: dict[str, Any], source: str) -> Suite:
    where = f"suite {source}"
    allowed = {"name", "description", "defaults", "benchmark", "include"}
    extra = sorted(set(doc) - allowed)
    if extra:
        raise UsageError(f"{where}: unknown top-level key {extra[0]!r}; allowed: {', '.join(sorted(allowed))}")
    included = _included(doc.get("include"), where)
    benches = doc.get("benchmark", [] if included else None)
    if not isinstance(benches, list) or not (benches or included):
        raise UsageError(f"{where}: needs at least one [[benchmark]] table")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UsageError(f"{where}: [defaults] must be a table of parameters")
    entries: list[Entry] = list(included)
    for i, b in enumerate(benches, 1):
        if not isinstance(b, dict) or not isinstance(b.get("name"), str):
            example = next(iter(registry.BENCHMARKS), "")
            raise UsageError(f'{where}: benchmark #{i} needs a name, e.g. name = "{example}"')
        unknown = sorted(set(b) - {"name", "params", "timeout", "set", "limit", "on"})
        if unknown:
            raise UsageError(
                f"{where}: benchmark #{i} ({b['name']}) has unknown key {unknown[0]!r}; "
                "use name, params, set, limit, timeout, on"
            )
        on = b.get("on")
        if on is not None and on not in TARGETS:
            raise UsageError(f"{where}: benchmark #{i} ({b['name']}): on is {' or '.join(TARGETS)}, not {on!r}")
        params = b.get("params", {})
        if not isinstance(params, dict):
            raise UsageError(f"{where}: params of benchmark #{i} must be a table")
        registry.get(b["name"])  # an unknown name: one line naming the close ones
        try:
            rows = _set_rows(b)
            for row in rows:
                for combo in expand(params):
                    name = registry.route(b["name"], {**row, **combo})  # a decoder's entry is its own benchmark's
                    fields = {f.name for f, _ in registry.get(name).params.flags()}
                    for default in expand({k: v for k, v in defaults.items() if k in fields and k not in combo}):
                        entry = make_entry(name, {**default, **row, **combo}, b.get("timeout"))
                        entries.append(replace(entry, on=on))
        except UsageError as exc:
            raise UsageError(f"{where}, benchmark #{i}: {exc}") from None
    return Suite(
        name=str(doc.get("name") or Path(source).stem),
        description=str(doc.get("description", "")),
        entries=entries,
        source=source,
    )


def _included(names: Any, where: str) -> list[Entry]:
    """The entries of the built-in suites ``include`` names, in order (none where it is absent)."""
    if names is None:
        return []
    listed = names if isinstance(names, list) else [names]
    if not listed or not all(isinstance(n, str) and n in BUILTIN for n in listed):
        raise UsageError(f"{where}: include names built-in suites ({', '.join(BUILTIN)}), not {names!r}")
    return [e for name in listed for e in builtin_suite(name).entries]


def _set_rows(b: dict[str, Any]) -> list[dict[str, Any]]:
    """The shapes of ``set = "NAME"`` (first ``limit`` of them), or one empty row."""
    if "set" not in b:
        if "limit" in b:
            raise UsageError("'limit' only applies with 'set'")
        return [{}]
    limit = b.get("limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise UsageError(f"limit must be a positive integer, got {limit!r}")
    names = b["set"] if isinstance(b["set"], list) else [b["set"]]
    return [row for name in names for row in registry.shape_set(b["name"], str(name)).rows[:limit]]


def load_suite_file(path: str | Path) -> Suite:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read suite file {p}: {exc.strerror}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"suite file {p} is not valid TOML: {exc}") from None
    return parse_suite(doc, str(p))


def builtin_suite(name: str) -> Suite:
    if name not in BUILTIN:
        raise UsageError(f"unknown suite {name!r}; built-in suites: {', '.join(BUILTIN)}")
    text = (resources.files("accelbench.suite") / "builtin" / f"{name}.toml").read_text(encoding="utf-8")
    suite = parse_suite(tomllib.loads(text), name)
    suite.source = "builtin"
    return suite


def resolve_targets(targets: list[str]) -> Suite:
    """``accelbench run`` arguments (suite names, TOML files, benchmark names) -> one suite."""
    if len(targets) == 1 and targets[0] in BUILTIN:
        return builtin_suite(targets[0])
    entries: list[Entry] = []
    names = []
    for t in targets:
        if t in BUILTIN:
            entries += builtin_suite(t).entries
        elif t.endswith(".toml") or Path(t).is_file():
            entries += load_suite_file(t).entries
        elif "/" in t:
            entries.append(make_entry(t, {}))
        else:
            raise UsageError(
                f"{t!r} is neither a suite ({', '.join(BUILTIN)}), a suite file (.toml) nor a benchmark name; "
                "see 'accelbench list'"
            )
        names.append(Path(t).stem if t.endswith(".toml") else t)
    return Suite(name="+".join(names), entries=entries, source="command line")
