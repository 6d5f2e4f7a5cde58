"""Accuracy mode: the served answers' quality against the FP32 reference of the same model on the same samples.

LoadGen (``TestMode.AccuracyOnly``) sends every sample once and writes each
answer the SUT returned, hex-encoded, to ``mlperf_log_accuracy.json``. The
quality metric is computed from that file - what the client really got - and
compared with the quality of an FP32 eager PyTorch run of the same weights over
the same samples. MLPerf's gates are 99% and 99.9% of the reference.

With a dataset, both are scored against its labels. Without one, the labels are
the FP32 reference's own answers, so the metric is agreement with FP32: a check
that a precision or backend changes no answer, on any model.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    from accelbench.infer.served import Inputs, Served


@dataclass(frozen=True)
class Verdict:
    metric: str
    quality: float
    reference: float
    gates: dict[str, bool]
    samples: int
    labels: str
    #: why the gate proves nothing (the reference answers are degenerate), or None
    uninformative: str | None = None

    @property
    def ratio(self) -> float:
        """Quality as a fraction of the reference's (1 when the reference scores 0: every answer meets it)."""
        return self.quality / self.reference if self.reference else 1.0

    @property
    def passed(self) -> bool:
        """MLPerf's loosest gate (99% of the reference); the 99.9% one is recorded beside it."""
        return self.gates.get("99%", False)


def read_accuracy_log(path: Path, dtype: Any) -> dict[int, np.ndarray]:
    """Each sample's last logged answer, by QSL index."""
    entries = json.loads(path.read_text() or "[]")
    return {int(e["qsl_idx"]): np.frombuffer(bytes.fromhex(e["data"]), dtype=dtype) for e in entries}


def reference_answers(
    served: "Served",
    model: Any,
    load: Callable[[int], "Inputs"],
    count: int,
    batch_size: int,
) -> list[np.ndarray]:
    """FP32 eager PyTorch answers, sample by sample order, batched as the SUT batches."""
    import torch

    answers: list[np.ndarray] = []
    device = next(iter(model.parameters())).device
    with torch.inference_mode():
        for start in range(0, count, batch_size):
            inputs = served.collate([load(i) for i in range(start, min(count, start + batch_size))])
            inputs = tuple(t.to(device) for t in inputs)
            answers += [a.copy() for a in served.answers(served.forward(model, inputs))]
    return answers


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
    gates = {f"{g * 100:g}%": bool(quality >= g * ref) for g in served.gates}
    why = degenerate(reference) if labels is None else None
    return Verdict(name, quality, ref, gates, n, "dataset" if labels is not None else "fp32-reference", why)


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
