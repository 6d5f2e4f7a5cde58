"""Fidelity to FP32 where accuracy cannot be measured: does a precision's path move the outputs more than
rounding to that precision does?

Answer agreement misjudges random weights (a random deep network amplifies any rounding until its argmaxes
flip), so without labels a bf16, fp16 or INT8 candidate is judged on how far its raw outputs move from FP32's,
against how far the FP32 model moves them with its storage rounded to that precision
(:mod:`accelbench.measure.rounding`); it passes up to ``HEADROOM`` times as far. Where rounding four bits
coarser moves them no further than that limit, the test cannot see a broken path and says so; FP32's decided
answers must also agree, as MLPerf's gate asks. The measured ratios are in docs/infer.md (Accuracy)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from accelbench.measure.rounding import AGREEMENT, COARSER_BITS, HEADROOM, MIN_DECIDED

if TYPE_CHECKING:
    from accelbench.infer.served import Inputs, Served
    from accelbench.results import details

#: raw output elements kept per sample (a segmentation's volume is strided down to this many)
KEEP = 4096


def rows(outputs: Any) -> list[np.ndarray] | None:
    """Each sample's raw output as float32 (strided down to ``KEEP`` elements), or None when the outputs are not
    one tensor with the batch first (a detector's boxes, a transcript): those are judged on answers alone."""
    import torch

    if not torch.is_tensor(outputs) or outputs.dim() < 1:
        return None
    flat = outputs.detach().float().reshape(outputs.shape[0], -1).cpu().numpy()
    step = max(1, flat.shape[1] // KEEP)
    return [flat[i, ::step].copy() for i in range(flat.shape[0])]


def outputs(
    served: "Served", model: Any, load: Callable[[int], "Inputs"], count: int, batch_size: int
) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Each sample's answer and raw output row (None when the family's outputs have no rows)."""

    answers: list[np.ndarray] = []
    raw: list[np.ndarray] | None = []
    from accelbench.devices.kind import kind_of

    device = next(iter(model.parameters())).device
    with kind_of(device).no_grad():
        for start in range(0, count, batch_size):
            inputs = served.collate([load(i) for i in range(start, min(count, start + batch_size))])
            out = served.forward(model, tuple(t.to(device) for t in inputs))
            answers += [a.copy() for a in served.answers(out)]
            got = rows(out)
            raw = None if got is None or raw is None else raw + got
    return answers, raw


def margins(raw: list[np.ndarray]) -> np.ndarray:
    """Each sample's lead of its largest output over the next: how decided a classifier's top-1 is."""
    return np.array([float(np.diff(np.sort(r)[-2:])[0]) if r.size > 1 else float("inf") for r in raw])


@dataclass(frozen=True)
class Fidelity:
    """How far a candidate's outputs strayed from FP32's, against the rounding its precision makes."""

    precision: str
    #: median over samples of the largest change of any output element: the candidate's, the precision's
    #: rounding's, and a rounding ``COARSER_BITS`` coarser (is the test able to see a broken path?)
    deviation: float
    rounding: float
    coarser: float
    #: answers whose FP32 lead exceeds twice the limit, and the share the candidate kept (None: too few)
    decided: int
    decided_agreement: float | None

    @property
    def ratio(self) -> float:
        """The candidate's deviation in units of the precision's own rounding (1: rounds as the precision does)."""
        return self.deviation / self.rounding if self.rounding > 0 else float("inf")

    @property
    def limit(self) -> float:
        return HEADROOM * self.rounding

    @property
    def informative(self) -> str | None:
        """None, or why these outputs cannot separate a faithful candidate from a broken one."""
        if self.coarser > self.limit:
            return None
        return (
            f"rounding {COARSER_BITS} bits coarser than {self.precision} moves these outputs {self.coarser:.3g}, "
            f"no further than the limit ({self.limit:.3g}, {HEADROOM:g}x {self.precision}'s own rounding): "
            "fidelity cannot be judged on these weights"
        )

    @property
    def passed(self) -> bool:
        kept = self.decided_agreement is None or self.decided_agreement >= AGREEMENT
        return self.deviation <= self.limit and kept

    def record(self) -> "details.Fidelity":
        """What the accuracy run's record keeps of it (``details.fidelity``)."""
        return {
            "precision": self.precision,
            "deviation": self.deviation,
            "rounding": self.rounding,
            "coarser": self.coarser,
            "coarser_bits": COARSER_BITS,
            "headroom": HEADROOM,
            "limit": self.limit,
            "ratio": self.ratio,
            "decided": self.decided,
            "decided_agreement": self.decided_agreement,
            "summary": self.describe(),
        }

    def describe(self) -> str:
        line = (
            f"outputs moved {self.deviation:.3g} from FP32 (median over samples), {self.ratio:.2f}x what rounding "
            f"to {self.precision} moves them ({self.rounding:.3g}; at most {HEADROOM:g}x passes)"
        )
        if self.decided_agreement is None:
            return line + f"; answers decided beyond that: {self.decided}, too few to test agreement"
        return line + f"; {self.decided_agreement:.2%} of the {self.decided} decided answers kept"


def fidelity(
    precision: str,
    candidate: dict[int, np.ndarray],
    reference: list[np.ndarray],
    rounded: list[np.ndarray],
    coarser: list[np.ndarray],
    answers: list[np.ndarray],
    reference_answers: list[np.ndarray],
    top1: bool,
) -> Fidelity:
    """Judge a candidate's raw output rows (by sample index) against FP32's and the rounded twins' (on the first
    ``len(rounded)`` samples). ``top1``: each answer is its row's argmax, so a lead over the next is a margin."""
    n = len(rounded)

    def moved(rows: Any) -> float:
        return float(np.median([np.abs(rows[i] - reference[i]).max() for i in range(n)]))

    verdict = Fidelity(precision, moved(candidate), moved(rounded), moved(coarser), 0, None)
    lead = margins(reference) if top1 else np.zeros(len(reference))
    decided = [i for i in range(len(reference)) if lead[i] > 2 * verdict.limit]
    kept = [bool(np.array_equal(answers[i], reference_answers[i])) for i in decided]
    share = float(np.mean(kept)) if len(kept) >= MIN_DECIDED else None
    return replace(verdict, decided=len(decided), decided_agreement=share)
