"""MLPerf Inference's own processed language data sets, read from a local folder, so a run serves MLPerf's workload.

Random prompts measure speed and a prompt file serves any text, but an MLPerf result is measured on the very token
ids MLPerf's reference harness hands its model, with the answer lengths its SUT allows. Each set's layout and where
it is written (:data:`MLPERF_SETS`) are described in ``docs/infer.md`` ("The request files, field by field").
Nothing is downloaded, and a pickle is read only under one of the expected names, by pandas, as MLPerf reads it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

from accelbench.errors import UsageError
from accelbench.params import NoOptions, opt
from accelbench.serve.sources.base import RunSettings, Source, Work
from accelbench.serve.sources.prompts import (
    PromptSample,
    PromptSet,
    ReadPrompts,
    _prompt_ids,
    _summary,
)
from accelbench.serve.sources.tokenizer import load_tokenizer

REPO = "mlcommons/inference"
#: why a row is skipped (counted in the summary)
NO_IDS, NOT_IDS, NO_TEXT = "no prompt ids", "prompt ids not a list of integers", "no prompt text"


class MlperfTarget(TypedDict, total=False):
    """MLPerf's accuracy target for the benchmark's data set (its figures, where they are published) and whether it
    applies to the run: only a run that served the whole set is held to it (``--accuracy-target mlperf``)."""

    values: dict[str, float]
    source: str
    applies: bool


class MlperfPrompts(ReadPrompts, total=False):
    """``details.prompts`` of the mlperf source: what the reader keeps of the file (:class:`.prompts.ReadPrompts`)
    and of MLPerf's own workload: the benchmark, its set's samples and the file's rows, whether the whole set was
    served, which column the prompts came from, MLPerf's output lengths and where they are written, the run's cap
    and limit, a mixed set's rows by task and which of them keep a reference, and MLPerf's accuracy target."""

    mlperf_benchmark: str
    mlperf_samples: int
    file_rows: int
    served_whole: bool
    prompt_ids: str
    max_output_tokens_mlperf: int
    min_output_tokens_mlperf: int
    max_output_tokens_mlperf_source: str
    output_tokens_rule: str
    max_output_tokens: int | None
    limit: int | None
    mlperf_subsets: dict[str, int]
    references_of: str
    mlperf_accuracy_target: MlperfTarget


@dataclass(frozen=True)
class MlperfSet:
    """Where one benchmark's processed data set is and how its rows read.

    ``ids_key`` holds the prompt's token ids, served as they are; ``text_key`` the full prompt as text, tokenized
    only when a file lacks ``ids_key`` (None where the text is not the prompt the ids encode). ``reference_key``
    is the answer ROUGE scores against; ``reference_ids_key`` its ids where the file has them (the reference's
    token count then needs no tokenizer). ``scored_rows``: (column, value) of the rows ROUGE scores, where the set
    mixes tasks scored otherwise; the other rows keep no reference.
    """

    files: tuple[str, ...]  # accepted names, in order of preference
    fmt: str  # "json" or "pickle"
    samples: int  # the full set's
    max_output_tokens: int
    min_output_tokens: int
    source: str  # where the sample count, the output lengths and the layout come from
    ids_key: str
    text_key: str | None
    reference_key: str
    reference_ids_key: str | None = None
    scored_rows: tuple[str, str] | None = None

    @property
    def needed_keys(self) -> tuple[str, ...]:
        """The keys besides the prompt's that every file of the layout has."""
        return (self.reference_key,) + ((self.scored_rows[0],) if self.scored_rows else ())


#: mlperf.conf benchmark (:data:`.limits.MLPERF_LIMITS`'s keys) -> its processed data set
MLPERF_SETS: dict[str, MlperfSet] = {
    "llama3_1-8b": MlperfSet(
        files=("cnn_eval.json",),
        fmt="json",
        samples=13368,
        max_output_tokens=128,
        min_output_tokens=1,
        source=(
            f"{REPO} language/llama3.1-8b/SUT_VLLM.py (SamplingParams max_tokens=128, min_tokens=1), dataset.py "
            "(tok_input, output), loadgen/mlperf.conf (13368 samples)"
        ),
        ids_key="tok_input",
        text_key=None,  # ``input`` is the bare article; the prompt the ids encode wraps it in ``instruction``
        reference_key="output",
    ),
    "llama2-70b": MlperfSet(
        files=(
            "open_orca_gpt4_tokenized_llama.sampled_24576.pkl",
            "open_orca_gpt4_tokenized_llama.sampled_24576.pkl.gz",
            "processed-data.pkl",
        ),
        fmt="pickle",
        samples=24576,
        max_output_tokens=1024,
        min_output_tokens=1,
        source=(
            f"{REPO} language/llama2-70b/SUT.py (gen_kwargs max_new_tokens=1024, min_new_tokens=1), processorca.py "
            "and dataset.py (tok_input, output, tok_output), loadgen/mlperf.conf (24576 samples)"
        ),
        ids_key="tok_input",
        text_key="input",
        reference_key="output",
        reference_ids_key="tok_output",
    ),
    "mixtral-8x7b": MlperfSet(
        files=(
            "09292024_mixtral_15k_mintoken2_v1.pkl",
            "2024.06.06_mixtral_15k_v4.pkl",
            "2024_06_06_mixtral_15k_v4.pkl",
        ),
        fmt="pickle",
        samples=15000,
        max_output_tokens=1024,
        min_output_tokens=2,
        source=(
            f"{REPO} language/mixtral-8x7b/SUT.py (gen_kwargs max_new_tokens=1024, min_new_tokens=2), dataset.py "
            "and evaluate-accuracy.py (tok_input, input, dataset, gt_output), loadgen/mlperf.conf (15000 samples)"
        ),
        ids_key="tok_input",
        text_key="input",
        reference_key="gt_output",
        scored_rows=("dataset", "OpenOrca"),
    ),
}

#: what a sample's output tokens mean here (the summary says it)
OUTPUT_RULE = (
    "the most a sample may generate: MLPerf's reference SUT generates greedily up to max_new_tokens and stops at EOS"
)


def _spec(benchmark: str) -> MlperfSet:
    spec = MLPERF_SETS.get(benchmark)
    if spec is None:
        what = f"benchmark {benchmark!r}" if benchmark else "this model (it has no MLPerf benchmark)"
        raise UsageError(f"accelbench reads no MLPerf data set for {what}: it reads those of {', '.join(MLPERF_SETS)}")
    return spec


def needs(benchmark: str) -> list[str]:
    """The file names a folder may hold ``benchmark``'s data set under, in order of preference."""
    return list(_spec(benchmark).files)


def find(folder: str | Path, benchmark: str) -> Path:
    """The data set's file: the first accepted name in ``folder``, else in one of its subfolders (MLPerf's
    downloads unpack into one, ``open_orca/`` for llama2-70b). ``folder`` may also name the file itself."""
    spec = _spec(benchmark)
    path = Path(folder).expanduser()
    if path.is_file():
        if path.name in spec.files:
            return path
        raise UsageError(
            f"MLPerf data {path} is a file, not a folder, and not one {benchmark} reads "
            f"({_names(spec)}): give the folder holding it"
        )
    if not path.is_dir():
        raise UsageError(f"MLPerf data folder {path} does not exist: give the folder holding {_names(spec)}")
    subfolders = sorted(p for p in path.iterdir() if p.is_dir())
    for where in (path, *subfolders):
        for name in spec.files:
            if (where / name).is_file():
                return where / name
    raise UsageError(
        f"MLPerf data folder {path} has no {benchmark} data set: looked for {_names(spec)} there and one folder "
        f"down (see {REPO} language/{_repo_folder(benchmark)}/README.md, 'Get Dataset')"
    )


def _names(spec: MlperfSet) -> str:
    return " or ".join(spec.files)


def _repo_folder(benchmark: str) -> str:
    return {"llama3_1-8b": "llama3.1-8b"}.get(benchmark, benchmark)


def read_mlperf(
    folder: str | Path,
    benchmark: str,
    tokenizer: Any,
    *,
    limit: int | None = None,
    max_output_tokens: int | None = None,
) -> PromptSet[MlperfPrompts]:
    """``benchmark``'s MLPerf data set from ``folder``, in the file's order (the order of MLPerf's sample indices).

    The prompts are the file's token ids, exactly as MLPerf serves them; ``tokenizer`` (the checkpoint's) checks
    that they fit its vocabulary and counts the references that come without ids. Each sample may generate
    MLPerf's most output tokens, capped at ``max_output_tokens``. ``limit``: stop after this many samples.
    """
    if limit is not None and limit < 1:
        raise UsageError(f"the number of prompts must be at least 1, not {limit}")
    if max_output_tokens is not None and max_output_tokens < 1:
        raise UsageError(f"the most output tokens must be at least 1, not {max_output_tokens}")
    spec = _spec(benchmark)
    file = find(folder, benchmark)
    rows, keys, digest = _read_json(file) if spec.fmt == "json" else _read_pickle(file)
    if not rows:
        raise UsageError(f"MLPerf data {file} ({benchmark}) has no samples")
    ids_key = _prompt_key(file, benchmark, spec, keys)
    cap = min(spec.max_output_tokens, max_output_tokens) if max_output_tokens else spec.max_output_tokens
    vocab = _vocab_size(tokenizer)
    prompts: list[list[int]] = []
    references: list[tuple[str | None, int | None]] = []
    skipped: Counter[str] = Counter()
    subsets: Counter[str] = Counter()
    read = 0
    for row in rows:
        if limit is not None and len(prompts) >= limit:
            break
        read += 1
        prompt = _row_prompt(row, ids_key, ids_key != spec.ids_key, tokenizer)
        if isinstance(prompt, str):
            skipped[prompt] += 1
            continue
        if vocab and max(prompt) >= vocab:
            raise UsageError(
                f"MLPerf data {file} ({benchmark}): sample {read} has token id {max(prompt)}, beyond the "
                f"tokenizer's {vocab}: the file was tokenized for another model; give that model's checkpoint"
            )
        prompts.append(prompt)
        references.append(_row_reference(row, spec))
        if spec.scored_rows:
            subsets[str(row.get(spec.scored_rows[0]))] += 1
    if not prompts:
        why = ", ".join(f"{n} {reason}" for reason, n in skipped.most_common())
        raise UsageError(f"MLPerf data {file} ({benchmark}) has no usable samples ({why})")
    samples = [
        PromptSample(prompt, text, count, cap)
        for prompt, (text, count) in zip(prompts, _count_references(references, tokenizer), strict=True)
    ]
    settings: MlperfPrompts = {
        "mlperf_benchmark": benchmark,
        "mlperf_samples": spec.samples,
        "file_rows": len(rows),
        "served_whole": len(samples) == spec.samples and len(rows) == spec.samples,
        "prompt_ids": ids_key if ids_key == spec.ids_key else f"{ids_key} (text, tokenized here: the file has no ids)",
        "max_output_tokens_mlperf": spec.max_output_tokens,
        "min_output_tokens_mlperf": spec.min_output_tokens,
        "max_output_tokens_mlperf_source": spec.source,
        "output_tokens_rule": OUTPUT_RULE,
        "max_output_tokens": max_output_tokens,
        "limit": limit,
    }
    if spec.scored_rows:
        column, value = spec.scored_rows
        settings["mlperf_subsets"] = dict(sorted(subsets.items()))
        settings["references_of"] = f"the rows whose {column} is {value} (ROUGE-scored by MLPerf)"
    name = f"mlperf {benchmark} {file.name}"
    return PromptSet(samples, _summary(file, digest, name, False, read, samples, skipped, settings))


def _read_json(file: Path) -> tuple[list[dict[str, Any]], list[str], str]:
    """The records of a JSON list (as ``download_cnndm.py`` writes it), their keys and the file's sha256."""
    data = file.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise UsageError(f"MLPerf data {file} is not UTF-8 text (byte {e.start})") from e
    except json.JSONDecodeError as e:
        raise UsageError(f"MLPerf data {file} is not JSON: line {e.lineno}: {e.msg}") from e
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise UsageError(f"MLPerf data {file} is JSON but not a list of objects, as MLPerf writes it")
    keys = sorted({k for r in value[:100] for k in r})
    return value, keys, digest


def _pandas() -> ModuleType:
    try:
        return importlib.import_module("pandas")
    except ImportError as e:
        raise UsageError(f"MLPerf's pickled data sets are read with pandas: pip install pandas ({e})") from e


def _read_pickle(file: Path) -> tuple[list[dict[str, Any]], list[str], str]:
    """The rows of a pickled DataFrame (as MLPerf's ``dataset.py`` reads it: ``pd.read_pickle``, a ``.gz`` name
    decompressed), its columns and the file's sha256."""
    pd = _pandas()
    digest = _sha256(file)
    try:
        frame = pd.read_pickle(file)
    except Exception as e:  # unpickling raises anything: UnpicklingError, EOFError, a missing module, a bad gzip
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"MLPerf data {file} does not read as a pandas pickle: {type(e).__name__}: {first}") from e
    if not isinstance(frame, pd.DataFrame):
        raise UsageError(f"MLPerf data {file} holds a {type(frame).__name__}, not a pandas DataFrame")
    keys = [str(c) for c in frame.columns]
    rows: list[dict[str, Any]] = frame.to_dict(orient="records")
    return rows, keys, digest


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _prompt_key(file: Path, benchmark: str, spec: MlperfSet, keys: list[str]) -> str:
    """The key the prompts come from (the ids, else the full prompt text); a file lacking it, or the reference,
    is the wrong file: say which keys it has."""
    prompt = spec.ids_key if spec.ids_key in keys else spec.text_key if spec.text_key in keys else None
    missing = [k for k in spec.needed_keys if k not in keys]
    if prompt is not None and not missing:
        return prompt
    if prompt is None:
        missing.insert(0, spec.ids_key + (f" (or {spec.text_key})" if spec.text_key else ""))
    found = ", ".join(keys[:16]) + (", ..." if len(keys) > 16 else "") if keys else "none"
    raise UsageError(f"MLPerf data {file} ({benchmark}) lacks {', '.join(missing)}; its keys: {found}")


def _row_prompt(row: dict[str, Any], key: str, text: bool, tokenizer: Any) -> list[int] | str:
    """A row's prompt ids (``text``: its prompt text tokenized, as :mod:`.prompts` reads a prompt without a
    template), or why it is skipped."""
    value = row.get(key)
    if text:
        return _prompt_ids(tokenizer, value, False) if isinstance(value, str) and value.strip() else NO_TEXT
    if value is None:
        return NO_IDS
    if isinstance(value, (str, bytes)):
        return NOT_IDS
    try:
        ids = [int(t) for t in value]  # a list in JSON, a list or an ndarray in a DataFrame
    except (TypeError, ValueError):
        return NOT_IDS
    return ids or NO_IDS


def _row_reference(row: dict[str, Any], spec: MlperfSet) -> tuple[str | None, int | None]:
    """A row's reference text and, where the file has its ids, their count."""
    if spec.scored_rows and row.get(spec.scored_rows[0]) != spec.scored_rows[1]:
        return None, None
    text = row.get(spec.reference_key)
    if not isinstance(text, str) or not text.strip():
        return None, None
    ids = row.get(spec.reference_ids_key) if spec.reference_ids_key else None
    try:
        count = len(ids) if ids is not None else 0
    except TypeError:  # a missing value in a DataFrame is a float NaN
        count = 0
    return text, count or None


def _count_references(
    references: list[tuple[str | None, int | None]], tokenizer: Any
) -> list[tuple[str | None, int | None]]:
    """Each reference with its token count: the file's where it has the ids, else the tokenizer's, without
    special tokens (the tokens a model writes to say it), in one batch; uncounted without a tokenizer (a
    performance run given no checkpoint: the file's ids are served as they are)."""
    todo = [i for i, (text, count) in enumerate(references) if text and count is None]
    if not todo or tokenizer is None:
        return references
    ids = tokenizer([references[i][0] for i in todo], add_special_tokens=False)["input_ids"]
    counted = list(references)
    for i, tokens in zip(todo, ids, strict=True):
        counted[i] = (references[i][0], len(tokens)) if len(tokens) else (None, None)
    return counted


def _vocab_size(tokenizer: Any) -> int:
    try:
        return len(tokenizer)
    except TypeError:
        return 0


@dataclass(frozen=True)
class MlperfOptions(NoOptions):
    mlperf_data: str = opt(
        "",
        "a folder holding MLPerf Inference's processed data set for the model's benchmark (llama3.1-8b: "
        "cnn_eval.json): its prompts, its output lengths and, served whole, its accuracy targets",
        sweep=False,
        metavar="DIR",
    )


class MlperfSource(Source):
    name = "mlperf"
    about = "--mlperf-data"
    Options = MlperfOptions

    @classmethod
    def check_run(cls, params: RunSettings, options: MlperfOptions) -> None:
        if not options.mlperf_data:
            raise UsageError("--source mlperf reads --mlperf-data DIR: give the folder of MLPerf's processed data set")
        from accelbench.serve.limits import preset_of

        preset = preset_of(params.model)
        needs(preset.mlperf)  # a benchmark whose data set accelbench does not read: one line naming those it does
        if not preset.mlperf_own:
            raise UsageError(
                f"{params.model} has no MLPerf benchmark of its own ({preset.mlperf}'s data set is tokenized for "
                f"another model): serve {preset.mlperf}'s model, or its prompts as text with --prompts"
            )
        find(options.mlperf_data, preset.mlperf)  # a folder without the benchmark's file: one line naming it

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        from accelbench.serve.limits import preset_of
        from accelbench.serve.quality import MLPERF_REFERENCE

        o: MlperfOptions = self.options
        tokenizer = load_tokenizer(params.tokenizer_dir) if params.tokenizer_dir else None
        benchmark = preset_of(params.model).mlperf
        limit = None if params.profile == "official" else total
        read = read_mlperf(o.mlperf_data, benchmark, tokenizer, limit=limit, max_output_tokens=params.output_tokens)
        samples = read.samples
        top = max(max(s.prompt) for s in samples)
        if top >= vocab:
            raise UsageError(
                f"the data set's token ids reach {top}, past the served model's vocabulary of {vocab}: serve the "
                "model at full scale (its real tokenizer's vocabulary)"
            )
        outs = [max(s.output_tokens, 2) for s in samples]
        summary: MlperfPrompts = {"source": self.name, **read.summary.to_dict()}
        reference = MLPERF_REFERENCE.get(benchmark)
        if reference is not None:  # MLPerf's accuracy target: for the whole set only (--accuracy-target mlperf)
            summary["mlperf_accuracy_target"] = {
                "values": dict(reference.values),
                "source": reference.source,
                "applies": bool(summary.get("served_whole")),
            }
        return Work.single([s.prompt for s in samples], outs, summary, tokenizer, [s.reference for s in samples])

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        return ["mlperf data"]
