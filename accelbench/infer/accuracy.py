"""Accuracy mode: the served answers' quality against the FP32 reference of the same model on the same samples.

LoadGen writes every answer the SUT returned to ``mlperf_log_accuracy.json``; the metric is computed from that
file (what the client got) against an FP32 eager run, under MLPerf's 99% and 99.9% gates. With a data set both
are scored against its labels; without one, against FP32's own answers, and a rounding precision is judged on
its fidelity to FP32 (``fidelity.py``). The record says which (docs/infer.md, Accuracy)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from accelbench.infer.results import ImageDetails, image_details
from accelbench.kit import metrics as fig
from accelbench.loadgen.record import loadgen_record

if TYPE_CHECKING:
    from accelbench.infer.fidelity import Fidelity
    from accelbench.infer.served import Served
    from accelbench.infer.serving import Serving
    from accelbench.infer.specs import InferParams
    from accelbench.kit.context import RunContext
    from accelbench.loadgen.start import Outcome
    from accelbench.results.details import AccuracyGates
    from accelbench.results.record import Result

#: MLPerf's accuracy gates by the share of the FP32 reference's quality they ask (a served model's ``gates``), as
#: the record names them
GATE_NAMES: dict[float, Literal["99%", "99.9%"]] = {0.99: "99%", 0.999: "99.9%"}
#: FP32 reference samples the rounded twin of the model is also run on (the rounding's median needs no more)
ROUNDING_SAMPLES = 64


@dataclass(frozen=True)
class Verdict:
    metric: str
    quality: float
    reference: float
    gates: AccuracyGates
    samples: int
    labels: str
    #: why the gate proves nothing (the reference answers are degenerate), or None
    uninformative: str | None = None
    #: a rounding candidate without labels: judged on fidelity to FP32, not on agreement
    fidelity: "Fidelity | None" = None

    @property
    def ratio(self) -> float:
        """Quality as a fraction of the reference's (1 when the reference scores 0: every answer meets it)."""
        return self.quality / self.reference if self.reference else 1.0

    @property
    def passed(self) -> bool:
        """MLPerf's loosest gate (99% of the reference; the 99.9% one is recorded beside it), or fidelity."""
        return self.fidelity.passed if self.fidelity is not None else self.gates.get("99%", False)

    @property
    def gate(self) -> str:
        """What the gate judged, in words a reader of the record needs: whether accuracy was verified."""
        if self.labels == "dataset":
            return f"accuracy verified: {self.metric} on the dataset's labels against the FP32 reference's"
        if self.fidelity is not None:
            return "fidelity to FP32 on these weights and synthetic samples; accuracy not verified"
        return "agreement with FP32 on these weights and synthetic samples; accuracy not verified"


def read_accuracy_log(path: Path, dtype: Any) -> dict[int, np.ndarray]:
    """Each sample's last logged answer, by QSL index."""
    entries = json.loads(path.read_text() or "[]")
    return {int(e["qsl_idx"]): np.frombuffer(bytes.fromhex(e["data"]), dtype=dtype) for e in entries}


def measure(
    params: "InferParams", serving: "Serving", record: dict[str, Any], settings: Any, ctx: "RunContext"
) -> "Result":
    """Accuracy mode: the FP32 reference (and, for a rounding precision without labels, its rounded twin), then
    LoadGen's accuracy run keeping each answer and raw output, then the verdict."""
    from accelbench.infer import fidelity as fid
    from accelbench.infer.driver import loadgen_run
    from accelbench.measure import rounding

    spec = serving.served
    assert spec is not None
    ctx.progress(f"FP32 reference on {serving.total} samples")
    reference, reference_rows = fid.outputs(spec, serving.model, serving.make_input, serving.total, params.batch_size)
    labels = serving.dataset.labels if serving.dataset is not None else None
    twin = (
        rounding.rounded_copy(serving.model, params.effective_precision) if labels is None and reference_rows else None
    )
    rounded = coarser = None
    if twin is not None:
        n, precision = min(serving.total, ROUNDING_SAMPLES), params.effective_precision
        ctx.progress(
            f"FP32 with its storage rounded to {precision}, then {rounding.COARSER_BITS} bits coarser ({n} samples)"
        )
        rounded = fid.outputs(spec, twin, serving.make_input, n, params.batch_size)[1]
        del twin
        twin = rounding.rounded_copy(serving.model, precision, coarser=rounding.COARSER_BITS)
        coarser = fid.outputs(spec, twin, serving.make_input, n, params.batch_size)[1]
        del twin
    raw: dict[int, np.ndarray] = {}

    def respond(indices: list[int], out: Any) -> list[np.ndarray]:
        got = fid.rows(out) if rounded is not None else None
        if got is not None:
            raw.update(zip(indices, got, strict=True))
        return spec.answers(out)

    ctx.progress(f"LoadGen {params.scenario} accuracy ({serving.total} samples)")
    outcome = loadgen_run(serving, settings, params, ctx, answers=respond)
    logged = read_accuracy_log(outcome.outdir / "mlperf_log_accuracy.json", spec.answer_dtype)
    fidelity = None
    if rounded and coarser and reference_rows and len(raw) == serving.total:
        answers = [logged[i] for i in range(serving.total)]
        top1 = spec.answer_is_argmax
        precision = params.effective_precision
        fidelity = fid.fidelity(precision, raw, reference_rows, rounded, coarser, answers, reference, top1)
    verdict = judge(spec, logged, reference, labels, fidelity)
    result = accuracy_result(params, record, outcome, verdict, spec.answer_dtype)
    image_details(result)["weights"] = serving.weights
    return result


def accuracy_result(
    params: "InferParams", record: dict[str, Any], outcome: "Outcome", verdict: Verdict, answer_dtype: Any
) -> "Result":
    """The record of an accuracy run: the verdict's figures, what its gate judged, and no verdict at all where the
    reference answers could not tell a right answer from a wrong one. ``answer_dtype``: how the logged answers
    decode."""
    d = outcome.detail
    unit = verdict.metric.replace("_", " ")
    metrics = {
        verdict.metric: fig.figure(verdict.quality, unit, higher_is_better=True),
        f"reference_{verdict.metric}": fig.figure(verdict.reference, unit, higher_is_better=True),
        "quality_ratio": fig.figure(verdict.ratio, "x FP32", higher_is_better=True),
    }
    fid = verdict.fidelity
    if fid is not None:  # agreement is shown, not judged: the reference's own agreement and the ratio say nothing
        metrics = {
            "fidelity_ratio": fig.figure(fid.ratio, f"x {fid.precision} rounding", higher_is_better=False),
            verdict.metric: metrics[verdict.metric],
        }
    details: ImageDetails = {
        "accuracy_gates": verdict.gates if fid is None else {"fidelity": fid.passed},
        "gate": verdict.gate,
        "accuracy_verified": verdict.labels == "dataset",
        "labels": verdict.labels,
        "samples": verdict.samples,
        "loadgen_log_dir": str(outcome.outdir),
        "loadgen_validity": outcome.detail.get("result_validity"),
        "answer_dtype": np.dtype(answer_dtype).name,
    }
    if fid is not None:
        details["fidelity"] = fid.record()
    reasons: list[str] = []
    if verdict.uninformative:  # no verdict at all rather than a VALID that proves nothing
        details["uninformative"] = verdict.uninformative
        conditions = outcome.conditions
        result = loadgen_record(params, record, metrics, verdict.metric, details, reasons, conditions, None, d)
        result.concern(
            "uninformative",
            f"uninformative: {verdict.uninformative}; serve real weights (--checkpoint FILE) or score against "
            "labels (--dataset DIR) for a verdict",
            first=True,
        )
        return result
    if fid is not None and not fid.passed:
        reasons.append(f"strays from FP32 beyond {fid.precision} rounding: {fid.describe()}")
    elif not verdict.passed:
        failed = [g for g, ok in verdict.gates.items() if not ok]
        reasons.append(
            f"accuracy below {', '.join(failed)} of the FP32 reference: {verdict.metric} {verdict.quality:.4f} "
            f"vs {verdict.reference:.4f} ({verdict.ratio:.2%})"
        )
    primary = "fidelity_ratio" if fid is not None else verdict.metric  # what the gate judged
    return loadgen_record(params, record, metrics, primary, details, reasons, outcome.conditions, verdict.passed, d)


def agreement(answers: list[np.ndarray], reference: list[Any]) -> float:
    """Fraction of samples whose answer equals the reference's (floats within 1e-3 relative)."""
    same = []
    for a, r in zip(answers, reference, strict=True):
        r = np.asarray(r)
        if a.shape != r.shape:
            same.append(False)
        elif np.issubdtype(a.dtype, np.floating):
            same.append(bool(np.allclose(a, r, rtol=1e-3, atol=1e-5)))
        else:
            same.append(bool(np.array_equal(a, r)))
    return float(np.mean(same)) if same else 0.0


def judge(
    served: "Served",
    logged: dict[int, np.ndarray],
    reference: list[np.ndarray],
    labels: list[Any] | None,
    fidelity: "Fidelity | None" = None,
) -> Verdict:
    n = len(reference)
    missing = [i for i in range(n) if i not in logged]
    if missing:
        raise RuntimeError(f"LoadGen's accuracy log lacks {len(missing)} of {n} samples (first: {missing[0]})")
    answers = [logged[i] for i in range(n)]
    if labels is None:
        name, quality, ref = "fp32_agreement", agreement(answers, reference), 1.0
    else:
        name = served.quality_name
        quality, ref = served.quality(answers, labels), served.quality(reference, labels)
    gates: AccuracyGates = {}
    for g in served.gates:
        gates[GATE_NAMES[g]] = bool(quality >= g * ref)
    # fidelity judges the outputs' distance, not the answers: degenerate answers do not void it
    why = degenerate(reference) if labels is None and fidelity is None else fidelity.informative if fidelity else None
    return Verdict(name, quality, ref, gates, n, "dataset" if labels is not None else "fp32-reference", why, fidelity)


#: A reference whose most common answer covers more than this share of the samples tests little.
DOMINANT_SHARE = 0.5


def degenerate(reference: list[np.ndarray]) -> str | None:
    """Why agreement with these reference answers would prove nothing, or None.

    Random weights often answer one class for every input: a backend that always answered that class would
    then agree 100%. A gate needs answers that differ from sample to sample.
    """
    keys = [np.asarray(a).tobytes() for a in reference]
    counts = Counter(keys)
    top = counts.most_common(1)[0][1] if counts else 0
    if len(counts) < 3 or top > DOMINANT_SHARE * len(keys):
        return (
            f"the FP32 reference gives {len(counts)} distinct answer(s), the commonest for {top} of {len(keys)} "
            "samples: agreement with it proves little"
        )
    return None
