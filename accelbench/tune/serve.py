"""``tune --task serve``: the engine settings that serve a language model the most tokens/s per device at a stated
interactivity.

A candidate is an engine (every local one installed: transformers' continuous batching, the static batch, vLLM),
a precision this device computes natively, compilation (torch.compile; vLLM's CUDA graphs), and the work's
shape: requests in flight (``--batch-size``, the engine's concurrent sequences) and, for continuous batching,
the batch-token budget of one forward step. Each trial is an Offline run at that fixed concurrency held to the
TPOT limit (``--tpot-ms``, default the preset's MLPerf Server limit): a run over it is INVALID (its p99 TPOT by
the SUT's clock, :mod:`accelbench.serve.limits`), so more requests in flight win only while each user
still reads tokens at the stated pace. That is a point of MLPerf Endpoints' Pareto curve; the search finds the
highest point under the interactivity line.

The KV cache is sized by the engine for the requests in flight (enough pages for ``--batch-size`` of the longest
requests): at a fixed concurrency a larger cache holds nothing more, and a smaller one would preempt, so the
cache follows the concurrency rather than being searched on its own.

Every finalist passes the LLM accuracy gate first (``--mode accuracy``): the served greedy tokens against the
FP32 model's at the positions rounding cannot flip, or ROUGE against a prompt file's answers (``--prompts``,
with ``--checkpoint DIR``). No candidate is the reference: the reference is FP32 ``generate`` one prompt at a
time, which no engine is, so FP32 engines are gated too.
"""

from __future__ import annotations

from typing import Any

from accelbench.serve.specs import LLMServeParams
from accelbench.tune.candidate import Candidate, Space, split_list
from accelbench.tune.specs import SERVE_PRECISIONS, TuneParams, local_engines

#: requests in flight tried around the best runtimes, by the device's batch class
SERVE_BATCHES = {"cpu": (4, 16, 32), "gpu": (32, 64, 128, 256)}


def serve_default() -> dict[str, Any]:
    """The default settings (``accelbench infer MODEL``'s, fp32): the candidate every other is measured against."""
    defaults = LLMServeParams.__dataclass_fields__
    return {"engine": defaults["engine"].default, "precision": "fp32", "batch_size": defaults["batch_size"].default}


def runtimes(params: "TuneParams", device: Any) -> "Space":
    """Every local engine x precision x compilation at the default concurrency: what is not installed or not
    native here is left out with the reason its run would give."""
    from accelbench.devices.precision import precision_reason
    from accelbench.serve.engines.base import engine_class

    wanted = split_list(params.precisions)
    space = Space([], [])
    for name in split_list(params.engines) or local_engines():
        impl = engine_class(name)
        missing = impl().unavailable()
        compiles = params.compile and "engine_compile" in impl.Options.__dataclass_fields__
        for precision in SERVE_PRECISIONS:
            if wanted and precision not in wanted:
                continue
            why = missing or (precision_reason(device, precision, params.emulated) if precision != "fp32" else None)
            for compiled in (False, True) if compiles else (False,):
                c = Candidate(serve_default() | {"engine": name, "precision": precision})
                c = c.with_(engine_compile=True) if compiled else c
                (space.left_out.append((c, why)) if why else space.candidates.append(c))
    return space


def shapes(params: "TuneParams", best: list["Candidate"], batch_class: str) -> list["Candidate"]:
    """Requests in flight around the best runtimes, and what each engine's own declaration searches at the best
    one's concurrency (continuous batching: its batch-token budget)."""
    from accelbench.serve.engines.base import engine_class

    given = [int(b) for b in split_list(params.batch_sizes)]
    out: list[Candidate] = []
    for c in best:
        sizes = given or list(SERVE_BATCHES.get(batch_class, SERVE_BATCHES["cpu"]))
        out += [c.with_(batch_size=b) for b in sizes]
        out += [c.with_(**change) for change in engine_class(c.settings["engine"]).search(c.settings)]
    return out


def gate_words(params: "TuneParams") -> str:
    weights = f"checkpoint {params.checkpoint}" if params.checkpoint else "random weights"
    if params.prompts:
        return f"ROUGE against {params.prompts}'s answers at 99% of FP32's, {weights}"
    return (
        f"greedy tokens against the FP32 model's on {weights}, at the positions rounding cannot flip (99% kept); "
        "every engine is gated, FP32 too"
    )


def accuracy_words(params: "TuneParams") -> str:
    if params.prompts:
        return f"accuracy verified: ROUGE on the answers of {params.prompts}"
    weights = f"checkpoint {params.checkpoint}" if params.checkpoint else "random weights"
    return f"accuracy not verified: FP32's tokens on {weights} (--prompts FILE with answers verifies it)"
