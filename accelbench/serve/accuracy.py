"""Accuracy mode for a decoder: are the served greedy tokens those of the FP32 reference, where rounding cannot
change them?

Where a random-weight decoder's next-token logits lead by less than rounding moves them, a faithful bf16 path picks
another token and writes another continuation, so whole answers misjudge it. Only the *decided* positions are
judged, where FP32's lead exceeds twice ``HEADROOM`` times what rounding moves the logits, walked while the answer
equals FP32's; the gate is MLPerf's 99% of those reached (``docs/infer.md``, "Accuracy").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from accelbench.measure.rounding import AGREEMENT, COARSER_BITS, HEADROOM, MIN_DECIDED, rounded_copy
from accelbench.serve.engines.static import no_eos

if TYPE_CHECKING:
    import torch

#: prompts an accuracy run serves (each once); the FP32 reference generates them one at a time
SAMPLES = 24
#: the precision whose rounding decides the positions for an FP32 candidate (which rounds nothing itself)
FP32_SCALE = "bf16"


@dataclass(frozen=True)
class Reference:
    """FP32's greedy tokens for each prompt, and per generated position how decided each one is."""

    tokens: list[list[int]]
    #: FP32's lead of its token's logit over the next one's (teacher-forced on its own continuation)
    leads: list[np.ndarray]
    #: the largest change of any logit when the storage is rounded to ``scale``
    rounding: list[np.ndarray]
    #: whether rounding ``COARSER_BITS`` bits coarser picks another token there
    coarser_flips: list[np.ndarray]
    scale: str

    def decided(self, i: int) -> np.ndarray:
        return self.leads[i] > 2 * HEADROOM * self.rounding[i]


def _continuation_logits(model: Any, prompt: list[int], tokens: list[int], device: "torch.device") -> "torch.Tensor":
    """The logits predicting each of ``tokens`` after ``prompt`` (one forward pass over the whole sequence)."""
    import torch

    seq = torch.tensor([prompt + tokens[:-1]], device=device)
    with torch.inference_mode():
        logits: torch.Tensor = model(seq).logits[0, len(prompt) - 1 :].float()
        return logits


def _lead(logits: "torch.Tensor") -> np.ndarray:
    """Per position, how far the top logit leads the next one."""
    top = logits.topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]).numpy()


def greedy(
    model: Any, prompts: list[list[int]], outs: list[int], device: "torch.device", eos: Any = None, batch: int = 8
) -> list[list[int]]:
    """Each prompt's greedy tokens (``outs[i]`` of them, or up to its end of sequence where ``eos`` is given),
    ``batch`` prompts at a time, left-padded with the padding masked."""
    import torch

    tokens: list[list[int]] = []
    ends = set(eos if isinstance(eos, list) else [eos]) - {None}
    for start in range(0, len(prompts), batch):
        group, lengths = prompts[start : start + batch], outs[start : start + batch]
        out = max(lengths)
        width = max(len(p) for p in group)
        ids = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(group):
            ids[i, width - len(p) :], mask[i, width - len(p) :] = torch.tensor(p), 1
        with torch.inference_mode():
            made = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                max_new_tokens=out,
                do_sample=False,
                pad_token_id=0,
                eos_token_id=eos if ends else no_eos(model.config),  # on past an end of sequence, as served
            )
        for row, n in zip(made[:, width:].tolist(), lengths, strict=True):
            row = row[:n]
            stop = next((i for i, t in enumerate(row) if t in ends), None)
            tokens.append(row if stop is None else row[: stop + 1])  # the end-of-sequence token is an answer's last
    return tokens


def reference(
    model: Any,
    prompts: list[list[int]],
    outs: list[int],
    precision: str,
    device: "torch.device",
    progress: Callable[[str], None],
    eos: Any = None,
) -> Reference:
    """FP32 ``model``'s greedy tokens, and how far rounding to
    ``precision`` (bf16's for FP32) and ``COARSER_BITS`` coarser moves the logits along them."""
    import torch

    scale = FP32_SCALE if precision == "fp32" else precision
    progress(f"FP32 reference: greedy tokens for {len(prompts)} prompts")
    tokens = greedy(model, prompts, outs, device, eos)
    logits = [_continuation_logits(model, p, t, device).cpu() for p, t in zip(prompts, tokens, strict=True)]
    leads = [_lead(lg) for lg in logits]
    progress(f"FP32 with its storage rounded to {scale}, then {COARSER_BITS} bits coarser")
    twin = rounded_copy(model, scale)
    rounding = [
        (_continuation_logits(twin, p, t, device).cpu() - lg).abs().amax(-1).numpy()
        for p, t, lg in zip(prompts, tokens, logits, strict=True)
    ]
    del twin
    twin = rounded_copy(model, scale, coarser=COARSER_BITS)
    flips = [
        (_continuation_logits(twin, p, t, device).argmax(-1).cpu() != torch.tensor(t)).numpy()
        for p, t in zip(prompts, tokens, strict=True)
    ]
    del twin
    return Reference(tokens, leads, rounding, flips, scale)


@dataclass(frozen=True)
class TokenAgreement:
    """The served tokens against FP32's: the decided positions' verdict, and the plain agreement figures."""

    precision: str
    scale: str
    samples: int
    #: positions decided in the reference (all prompts), and those the coarser rounding flips
    decided_total: int
    coarser_flipped: int
    #: decided positions the walk reached, and those the candidate kept
    reached: int
    kept: int
    sequences_equal: float  # share of prompts answered with FP32's exact tokens
    positions_equal: float  # share of positions with FP32's token (after a divergence the contexts differ)
    mean_prefix: float  # tokens equal to FP32's before the first difference, mean over prompts
    distinct: int  # distinct tokens in the reference's answers

    @property
    def decided_agreement(self) -> float | None:
        return self.kept / self.reached if self.reached else None

    @property
    def informative(self) -> str | None:
        """None, or why these tokens cannot separate a faithful path from a broken one."""
        if self.distinct < 3:
            return f"the FP32 reference writes {self.distinct} distinct token(s): agreement with it proves little"
        if self.decided_total < MIN_DECIDED:
            return (
                f"only {self.decided_total} positions are decided beyond {self.scale}'s rounding (at least "
                f"{MIN_DECIDED} needed): the tokens cannot be judged on these weights"
            )
        if not self.coarser_flipped:
            return (
                f"rounding {COARSER_BITS} bits coarser than {self.scale} flips none of the {self.decided_total} "
                "decided tokens: a path broken that much would pass unseen"
            )
        if not self.reached:
            return "the served tokens left FP32's at undecided positions before reaching a decided one"
        return None

    @property
    def passed(self) -> bool:
        share = self.decided_agreement
        return share is not None and share >= AGREEMENT

    def describe(self) -> str:
        share = self.decided_agreement
        kept = f"{share:.2%}" if share is not None else "none"
        basis = f"{self.scale}'s rounding" + (" (an FP32 candidate rounds nothing)" if self.precision == "fp32" else "")
        return (
            f"{kept} of the {self.reached} decided tokens reached kept (decided: FP32's lead over the next token "
            f"exceeds {2 * HEADROOM:g}x what {basis} moves the logits; {self.decided_total} in the reference, "
            f"{self.coarser_flipped} of which rounding {COARSER_BITS} bits coarser flips); whole sequences equal "
            f"{self.sequences_equal:.0%}, positions equal {self.positions_equal:.0%}"
        )


def judge(candidate: list[list[int]], ref: Reference, precision: str) -> TokenAgreement:
    """Walk each prompt's served tokens against FP32's while they agree, counting the decided positions kept."""
    reached = kept = equal_positions = positions = 0
    prefixes, whole = [], []
    for i, (got, want) in enumerate(zip(candidate, ref.tokens, strict=True)):
        decided = ref.decided(i)
        prefix = 0
        for t, w in enumerate(want):
            same = t < len(got) and got[t] == w
            if decided[t]:
                reached += 1
                kept += same
            if not same:
                break
            prefix += 1
        prefixes.append(prefix)
        whole.append(got == want)
        equal_positions += sum(1 for a, b in zip(got, want, strict=False) if a == b)
        positions += len(want)
    decided_total = int(sum(ref.decided(i).sum() for i in range(len(ref.tokens))))
    flipped = int(sum((ref.coarser_flips[i] & ref.decided(i)).sum() for i in range(len(ref.tokens))))
    return TokenAgreement(
        precision=precision,
        scale=ref.scale,
        samples=len(candidate),
        decided_total=decided_total,
        coarser_flipped=flipped,
        reached=reached,
        kept=kept,
        sequences_equal=float(np.mean(whole)) if whole else 0.0,
        positions_equal=equal_positions / positions if positions else 0.0,
        mean_prefix=float(np.mean(prefixes)) if prefixes else 0.0,
        distinct=len({t for seq in ref.tokens for t in seq}),
    )


def served_tokens(log: Path, count: int) -> list[list[int]]:
    """Each prompt's tokens as LoadGen logged the SUT's answer (its last one per sample), by QSL index."""
    entries = json.loads(log.read_text() or "[]")
    got = {int(e["qsl_idx"]): np.frombuffer(bytes.fromhex(e["data"]), dtype=np.int32).tolist() for e in entries}
    missing = [i for i in range(count) if i not in got]
    if missing:
        raise RuntimeError(f"LoadGen's accuracy log lacks {len(missing)} of {count} prompts (first: {missing[0]})")
    return [got[i] for i in range(count)]


def details_of(verdict: TokenAgreement) -> dict[str, Any]:
    return {
        "precision": verdict.precision,
        "rounding_of": verdict.scale,
        "headroom": HEADROOM,
        "coarser_bits": COARSER_BITS,
        "decided_in_reference": verdict.decided_total,
        "decided_flipped_by_coarser": verdict.coarser_flipped,
        "decided_reached": verdict.reached,
        "decided_kept": verdict.kept,
        "mean_equal_prefix_tokens": verdict.mean_prefix,
        "distinct_reference_tokens": verdict.distinct,
        "summary": verdict.describe(),
    }


def rouge(work: Any, served: list[list[int]], ref: Reference, progress: Callable[[str], None]) -> dict[str, Any]:
    """ROUGE of the served answers and of FP32's against the prompt file's reference answers (the samples that
    have one), and MLPerf's gates of the first against the second: 99% and 99.9% of each score, and the tokens
    per sample within 0.9-1.1 of FP32's."""
    from accelbench.serve import quality

    references = work.references or []
    keep = [i for i, r in enumerate(references) if r]
    progress(f"ROUGE of {len(keep)} answers against the file's references")
    answers = [references[i] for i in keep]

    def scores(tokens: list[list[int]]) -> Any:
        picked = [tokens[i] for i in keep]
        return quality.score(quality.decode(work.tokenizer, picked), answers, [len(t) for t in picked])

    served_scores, fp32_scores = scores(served), scores(ref.tokens)
    verdict = quality.gate(served_scores, fp32_scores)
    return {"served": served_scores.to_dict(), "fp32": fp32_scores.to_dict(), "verdict": verdict.to_dict()}


def served_rouge(
    work: Any, served: list[list[int]], target: Any | None, progress: Callable[[str], None]
) -> dict[str, Any]:
    """ROUGE of a server's answers against the prompt file's references, gated against ``target`` (a
    :class:`~accelbench.serve.quality.Reference`: MLPerf's or the user's), or scored only where none is
    given: the weights are the server's, so no FP32 run of them is at hand to set the bar."""
    from accelbench.serve import quality

    references = work.references or []
    keep = [i for i, r in enumerate(references) if r]
    if not keep:
        raise RuntimeError("the prompt file has no reference answers to score the server's answers against")
    progress(f"ROUGE of {len(keep)} answers against the file's references")
    picked = [served[i] for i in keep]
    scores = quality.score(
        quality.decode(work.tokenizer, picked), [references[i] for i in keep], [len(t) for t in picked]
    )
    verdict = quality.gate(scores, target) if target is not None else None
    return {"served": scores.to_dict(), "fp32": None, "verdict": verdict.to_dict() if verdict else None}
