"""Named shape sets: DeepBench's published problem lists and accelbench's transformer shapes.

Files ship in ``accelbench/kernels/sets/`` (see its SOURCE.md); each CSV row
becomes the shape parameters of one benchmark entry, with DeepBench's column
names translated to accelbench's flags (``wstride`` -> ``stride_w``,
``sparsity`` -> ``density``). A ``label`` column names the row and is not a parameter.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable

from accelbench.errors import UsageError

DEEPBENCH = ("train", "training"), ("inference-server", "inference_server"), ("inference-device", "inference_device")


@dataclass(frozen=True)
class ShapeSet:
    benchmark: str
    name: str
    file: str
    rows: list[dict[str, Any]]
    labels: list[str]

    @property
    def columns(self) -> list[str]:
        return list(self.rows[0]) if self.rows else []


def _bool(text: str) -> bool:
    return text.strip().lower() in ("true", "1", "yes")


def _gemm(r: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {"m": int(r["m"]), "n": int(r["n"]), "k": int(r["k"])}
    if "a_t" in r:
        row |= {"a_t": _bool(r["a_t"]), "b_t": _bool(r["b_t"])}
    return row


def _conv(r: dict[str, str]) -> dict[str, Any]:
    names = {"wstride": "stride_w", "hstride": "stride_h"}
    return {names.get(k, k): int(v) for k, v in r.items()}


def _rnn(r: dict[str, str]) -> dict[str, Any]:
    return {"hidden": int(r["hidden"]), "batch": int(r["batch"]), "timesteps": int(r["timesteps"]), "cell": r["cell"]}


def _sparse(r: dict[str, str]) -> dict[str, Any]:
    return {"m": int(r["m"]), "n": int(r["n"]), "k": int(r["k"]), "density": round(1.0 - float(r["sparsity"]), 6)}


def _allreduce(r: dict[str, str]) -> dict[str, Any]:
    """DeepBench lists message sizes in floats; accelbench's --sizes are bytes."""
    return {"sizes": str(int(r["floats"]) * 4)}


def _attention(r: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {k: int(r[k]) for k in ("batch", "heads", "seq_len", "head_dim")}
    return row | {"causal": _bool(r["causal"])}


_CONVERT: dict[str, Callable[[dict[str, str]], dict[str, Any]]] = {
    "gemm": _gemm,
    "conv": _conv,
    "rnn": _rnn,
    "sparse_gemm": _sparse,
    "attention": _attention,
    "all_reduce": _allreduce,
}
#: benchmark -> (file prefix, [(set name, file stem)])
_SETS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "kernels/gemm": ("gemm", [(n, f"gemm_{s}_set") for n, s in DEEPBENCH] + [("transformer", "gemm_transformer_set")]),
    "kernels/conv": ("conv", [(n, f"conv_{s}_set") for n, s in DEEPBENCH]),
    "kernels/rnn": ("rnn", [(n, f"rnn_{s}_set") for n, s in DEEPBENCH]),
    "kernels/sparse": ("sparse_gemm", [(n, f"sparse_gemm_{s}_set") for n, s in DEEPBENCH[1:]]),
    "kernels/attention": ("attention", [("transformer", "attention_transformer_set")]),
    "kernels/allreduce": ("all_reduce", [("train", "all_reduce")]),
}


def _set_name(name: str) -> str:
    return name if name == "transformer" else f"deepbench-{name}"


@functools.cache
def _load(benchmark: str, name: str, stem: str) -> ShapeSet:
    kind, _ = _SETS[benchmark]
    path = resources.files("accelbench.kernels") / "sets" / f"{stem}.csv"
    rows, labels = [], []
    with path.open(encoding="utf-8") as f:
        for i, raw in enumerate(csv.DictReader(f), 1):
            label = raw.pop("label", None) or f"#{i}"
            rows.append(_CONVERT[kind](raw))
            labels.append(label)
    return ShapeSet(benchmark, _set_name(name), f"{stem}.csv", rows, labels)


def sets_for(benchmark: str) -> list[ShapeSet]:
    if benchmark not in _SETS:
        return []
    return [_load(benchmark, name, stem) for name, stem in _SETS[benchmark][1]]


def all_sets() -> list[ShapeSet]:
    return [s for b in _SETS for s in sets_for(b)]


def load_set(benchmark: str, name: str) -> ShapeSet:
    found = {s.name: s for s in sets_for(benchmark)}
    if name not in found:
        have = ", ".join(found) or "none"
        raise UsageError(
            f"unknown shape set {name!r} for {benchmark}; its sets: {have} (see 'accelbench kernels --sets')"
        )
    return found[name]
