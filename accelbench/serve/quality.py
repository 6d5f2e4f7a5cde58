"""Scoring generated text as MLPerf's LLM accuracy scripts do, and gating it at 99% and 99.9% of a reference.

Speed bought by a lower precision or a faster engine is worth reporting only if the answers stay as good: MLPerf
accepts a llama2-70b or llama3.1-8b result only when its ROUGE reaches 99% (or 99.9%) of the reference's and its
output length stays within 0.9-1.1 of it. The figures are computed as mlcommons/inference computes them, without
downloading NLTK's model (:func:`sentence_splitter`); ``docs/infer.md`` lists the steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable

from accelbench.errors import BenchmarkSkipped, UsageError

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
#: the output-length figures a reference may give, in the order the window prefers them
LENGTH_KEYS = ("tokens_per_sample", "chars_per_sample")
#: MLPerf's accuracy levels: a result must reach these fractions of the reference's scores
LEVELS = {"99%": 0.99, "99.9%": 0.999}
#: MLPerf's output-length window: within these fractions of the reference's length
WINDOW = (0.9, 1.1)
#: the pip package ROUGE needs (a dependency of the ``llm`` and ``test`` extras)
PACKAGE = "rouge-score"
#: told to untrained Punkt when English Punkt is not installed: abbreviations after which a period ends no sentence
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt vs etc e.g i.e u.s u.k u.n a.m p.m inc ltd co corp dept univ est approx "
    "jan feb aug sep sept oct nov dec gen gov sen rep rev sgt capt col lt fig vol ed eds".split()
)


@dataclass(frozen=True)
class Reference:
    """Scores to gate against (MLPerf's 0-100 scale) and where they come from."""

    values: Mapping[str, float]
    source: str


#: MLPerf's published reference scores, valid only for its own data set served whole (OpenOrca's 24,576 samples
#: for llama2-70b, CNN/DailyMail's 13,368 for llama3.1-8b), keyed as :data:`.limits.MLPERF_LIMITS` is. llama2-70b
#: is gated on ROUGE-1/2/L and tokens per sample; llama3.1-8b on all four ROUGE and characters per sample
MLPERF_REFERENCE: dict[str, Reference] = {
    "llama2-70b": Reference(
        {"rouge1": 44.4312, "rouge2": 22.0352, "rougeL": 28.6162, "tokens_per_sample": 294.45},
        "MLPerf Inference language/llama2-70b accuracy target (FP16 reference, OpenOrca, 24,576 samples)",
    ),
    "llama3_1-8b": Reference(
        {
            "rouge1": 38.7792,
            "rouge2": 15.9075,
            "rougeL": 24.4957,
            "rougeLsum": 35.793,
            "chars_per_sample": 8167644 / 13368,
        },
        "MLPerf Inference language/llama3.1-8b datacenter accuracy target (BF16 reference, CNN/DailyMail, 13,368 "
        "samples)",
    ),
}


def target(text: str, model: str) -> Reference:
    """``--accuracy-target``: ``mlperf`` (the preset's published target) or ``rouge1=R,...`` figures given."""
    if text == "mlperf":
        from accelbench.serve.limits import preset_of

        benchmark = preset_of(model).mlperf
        if benchmark not in MLPERF_REFERENCE:
            known = ", ".join(MLPERF_REFERENCE)
            raise UsageError(f"MLPerf publishes no ROUGE target for {model} (only {known}): give rouge1=R,...")
        return MLPERF_REFERENCE[benchmark]
    values: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in (*ROUGE_KEYS, *LENGTH_KEYS):
            names = ", ".join((*ROUGE_KEYS, *LENGTH_KEYS))
            raise UsageError(f"--accuracy-target: unknown figure {key!r}; give {names}")
        try:
            values[key] = float(value)
        except ValueError:
            raise UsageError(f"--accuracy-target: {key} needs a number, got {value!r}") from None
        if not 0 <= values[key] <= (100 if key in ROUGE_KEYS else float("inf")):
            raise UsageError(f"--accuracy-target: {key} {values[key]:g} is outside ROUGE's 0-100")
    if not any(k in values for k in ROUGE_KEYS):
        raise UsageError("--accuracy-target needs a ROUGE figure (rouge1=R,...) or mlperf")
    return Reference(values, "--accuracy-target")


@dataclass(frozen=True)
class Scores:
    """MLPerf's accuracy figures for one run: mean ROUGE F-measures x 100 and the output lengths."""

    rouge1: float
    rouge2: float
    rougeL: float  # MLPerf's and rouge-score's names
    rougeLsum: float
    samples: int
    tokens_per_sample: float | None  # None when the token counts were not given
    chars_per_sample: float
    splitter: str

    @property
    def values(self) -> dict[str, float]:
        """The figures a gate reads (those a :class:`Reference` may give)."""
        out = {k: getattr(self, k) for k in ROUGE_KEYS} | {"chars_per_sample": self.chars_per_sample}
        return out if self.tokens_per_sample is None else out | {"tokens_per_sample": self.tokens_per_sample}

    def to_dict(self) -> dict[str, Any]:
        """As MLPerf prints them (rounded to 4 places) plus the count and the sentence splitter."""
        return {k: round(v, 4) for k, v in self.values.items()} | {
            "samples": self.samples,
            "sentence_splitter": self.splitter,
        }


@dataclass(frozen=True)
class Window:
    """MLPerf's output-length check: ``value`` within ``low``..``high`` times the reference's."""

    metric: str
    value: float
    reference: float
    low: float = WINDOW[0]
    high: float = WINDOW[1]

    @property
    def ok(self) -> bool:
        return self.low * self.reference <= self.value <= self.high * self.reference

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": round(self.value, 4),
            "reference": round(self.reference, 4),
            "ratio": round(self.value / self.reference, 4) if self.reference else None,
            "bounds": [self.low, self.high],
            "ok": self.ok,
        }


@dataclass(frozen=True)
class Verdict:
    """Whether a run's scores hold MLPerf's accuracy gates against a reference, and why not."""

    values: Mapping[str, float]  # the candidate's figures
    reference: Mapping[str, float]
    source: str
    ratios: Mapping[str, float]  # candidate / reference, per gated ROUGE score
    passed: Mapping[str, bool]  # level ("99%", "99.9%") -> every gated score held and the window held
    window: Window | None  # None where the reference gives no output length
    reasons: tuple[str, ...]  # one line per failure, each naming its level

    def to_dict(self) -> dict[str, Any]:
        return {
            "values": {k: round(v, 4) for k, v in self.values.items()},
            "reference": {k: round(v, 4) for k, v in self.reference.items()},
            "source": self.source,
            "ratios": {k: round(v, 5) for k, v in self.ratios.items()},
            "passed": dict(self.passed),
            "window": self.window.to_dict() if self.window else None,
            "reasons": list(self.reasons),
        }


def unavailable() -> str | None:
    """Why ROUGE cannot be computed here (the package is missing), or None: checked before a long run."""
    try:
        from rouge_score import rouge_scorer  # noqa: F401
    except ImportError:
        return f"ROUGE needs the {PACKAGE} package: pip install {PACKAGE} (or pip install 'accelbench[llm]')"
    return None


def decode(tokenizer: Any, outputs: Sequence[Sequence[int]]) -> list[str]:
    """Generated token ids as text, as MLPerf decodes them (``skip_special_tokens=True``)."""
    return list(tokenizer.batch_decode([list(o) for o in outputs], skip_special_tokens=True))


def score(generated: Sequence[str], references: Sequence[str], generated_tokens: Sequence[int] | None = None) -> Scores:
    """MLPerf's ROUGE scores of ``generated`` against ``references`` (pairwise, in order), and the lengths.

    ``generated_tokens``: how many tokens each sample generated (for tokens per sample).
    Raises :class:`BenchmarkSkipped` when ``rouge-score`` is missing (check :func:`unavailable` first).
    """
    if len(generated) != len(references):
        raise UsageError(f"{len(generated)} generated texts for {len(references)} references: give one for each")
    if not generated:
        raise UsageError("no generated texts to score: give at least one sample")
    if generated_tokens is not None and len(generated_tokens) != len(generated):
        raise UsageError(f"{len(generated_tokens)} token counts for {len(generated)} generated texts")
    reason = unavailable()
    if reason:
        raise BenchmarkSkipped(reason)
    from rouge_score import rouge_scorer

    split, splitter = sentence_splitter()
    preds = [_lines(text, split) for text in generated]
    targets = [_lines(text, split) for text in references]
    scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_KEYS, 0.0)
    for target, pred in zip(targets, preds, strict=True):
        for key, value in scorer.score(target, pred).items():
            totals[key] += value.fmeasure
    n = len(preds)
    mean = {k: 100 * v / n for k, v in totals.items()}
    return Scores(
        rouge1=mean["rouge1"],
        rouge2=mean["rouge2"],
        rougeL=mean["rougeL"],
        rougeLsum=mean["rougeLsum"],
        samples=n,
        tokens_per_sample=sum(generated_tokens) / n if generated_tokens is not None else None,
        chars_per_sample=sum(len(p) for p in preds) / n,
        splitter=splitter,
    )


def gate(candidate: Scores | Mapping[str, float], reference: Reference | Scores | Mapping[str, float]) -> Verdict:
    """MLPerf's accuracy gates: each ROUGE score the reference gives at 99% and 99.9% of it, and the output
    length within 0.9-1.1 of the reference's (tokens per sample where the reference gives it, else characters).

    ``reference``: :data:`MLPERF_REFERENCE`'s entry for the model, or the scores of a reference run (the FP32
    run of the same prompts); a level passes only if every gated score and the window hold.
    """
    cand = _figures(candidate.values if isinstance(candidate, Scores) else candidate)
    if isinstance(reference, Reference):
        ref, source = _figures(reference.values), reference.source
    elif isinstance(reference, Scores):
        ref, source = _figures(reference.values), "reference run"
    else:
        ref, source = _figures(reference), "given reference"
    gated = [k for k in ROUGE_KEYS if k in ref]
    if not gated:
        raise UsageError(f"the reference gives no ROUGE score ({', '.join(ROUGE_KEYS)}): nothing to gate on")
    reasons: list[str] = []
    ratios: dict[str, float] = {}
    passed = dict.fromkeys(LEVELS, True)
    for key in gated:
        if key not in cand:
            reasons.append(f"{key}: the run has no score to compare with the reference's {ref[key]:.4f}")
            passed = dict.fromkeys(LEVELS, False)
            continue
        if ref[key]:  # a reference scoring 0 has no ratio (JSON has no infinity); its gate is met by any score
            ratios[key] = cand[key] / ref[key]
        for level, fraction in LEVELS.items():
            if cand[key] < fraction * ref[key]:
                passed[level] = False
                reasons.append(
                    f"{level}: {key} {cand[key]:.4f} is under {level} of the reference's {ref[key]:.4f} "
                    f"({fraction * ref[key]:.4f})"
                )
    window = None
    metric = next((k for k in LENGTH_KEYS if k in ref), None)
    if metric is not None and metric not in cand:
        reasons.append(f"window: the run has no {metric} to hold within {WINDOW[0]}-{WINDOW[1]} of the reference's")
        passed = dict.fromkeys(LEVELS, False)
    elif metric is not None:
        window = Window(metric, cand[metric], ref[metric])
        if not window.ok:
            passed = dict.fromkeys(LEVELS, False)
            reasons.append(
                f"window: {metric} {window.value:.4g} is {window.value / window.reference:.3f} of the reference's "
                f"{window.reference:.4g}, outside {WINDOW[0]}-{WINDOW[1]}"
            )
    return Verdict(cand, ref, source, ratios, passed, window, tuple(reasons))


def _figures(values: Mapping[str, Any]) -> dict[str, float]:
    """The gateable figures of a mapping (a record's ``to_dict`` also carries counts and names)."""
    return {k: float(values[k]) for k in (*ROUGE_KEYS, *LENGTH_KEYS) if values.get(k) is not None}


@cache
def sentence_splitter() -> tuple[Callable[[str], list[str]], str]:
    """The sentence splitter MLPerf uses where installed (NLTK's English Punkt), else untrained Punkt told
    :data:`ABBREVIATIONS`; with the name a record keeps. Never downloads."""
    import nltk
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        params = PunktParameters()
        params.abbrev_types = set(ABBREVIATIONS)
        punkt = PunktSentenceTokenizer(params)
        return punkt.tokenize, f"nltk Punkt untrained + {len(ABBREVIATIONS)} abbreviations (no English punkt_tab here)"
    return nltk.sent_tokenize, "nltk.sent_tokenize, English punkt_tab (as MLPerf)"


def _lines(text: str, split: Callable[[str], list[str]]) -> str:
    """MLPerf's post-processing: stripped, one sentence a line (ROUGE-Lsum's sentence boundaries)."""
    return "\n".join(split(text.strip()))
