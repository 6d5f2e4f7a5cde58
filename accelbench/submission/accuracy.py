"""A result's accuracy folder, and what its accuracy.txt says.

accuracy.txt carries MLPerf's metric, in the form MLCommons' own scripts print it, only where the record measured it
on the benchmark's data set; otherwise it says in words what was measured (agreement with FP32 on synthetic
samples, say), with no line the checker reads as the metric, so that the checker reports the gap.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from accelbench.loadgen.mlcommons import Model
from accelbench.submission.output import ACCURACY_LOG, ACCURACY_TXT, DETAIL, SUMMARY, copy_logs, write_text
from accelbench.submission.plan import Pick
from accelbench.submission.runs import Source, record_reasons, record_weights
from accelbench.submission.truncate import truncate


def write_accuracy(pick: Pick, folder: Path) -> list[str]:
    """The accuracy folder (LoadGen's logs, accuracy.txt, the truncated accuracy log); why it is not MLPerf's."""
    acc = pick.accuracy
    assert acc is not None
    src = acc.log_dir()
    copy_logs(src, folder, (SUMMARY, DETAIL))
    text, why = accuracy_text(pick.model, acc)
    write_text(folder / ACCURACY_TXT, text)
    shutil.copyfile(src / ACCURACY_LOG, folder / ACCURACY_LOG)
    truncate(folder / ACCURACY_LOG, folder / ACCURACY_TXT)
    blocking = record_reasons(acc)[0]
    if why:  # says what the record's own "not scored on the data set" says, and what was measured instead
        blocking = [b for b in blocking if "not scored on the benchmark's data set" not in b] + [why]
    count = acc.detail().get("qsl_reported_total_count")
    if count != pick.model.dataset_size:
        blocking.append(f"its accuracy run scored {count} samples where MLPerf asks all {pick.model.dataset_size}")
    return blocking


def on_dataset(s: Source) -> bool:
    """Whether an accuracy record measured its quality on the benchmark's data set (not agreement with FP32 on
    synthetic samples): an image model against the data set's labels, a language model by ROUGE on MLPerf's own
    processed set (``--source mlperf``)."""
    d = s.details
    if d.get("accuracy_verified") is not True:
        return False
    if d.get("labels") == "dataset":
        return True
    prompts = d.get("prompts")
    return isinstance(prompts, dict) and bool(prompts.get("mlperf_benchmark")) and isinstance(d.get("rouge"), dict)


def accuracy_text(model: Model, s: Source) -> tuple[str, str | None]:
    """accuracy.txt for an accuracy record, in the form MLCommons' script for ``model`` prints, where the record
    measured it on the benchmark's data set; else words saying what was measured, with no line the checker reads
    as MLPerf's metric. Returns the text and why the result's accuracy does not hold MLPerf's (None: it does)."""
    found = _metric(model, s) if on_dataset(s) else None
    if found is None:
        return _not_measured(model, s), (
            f"its accuracy was not MLPerf's {model.name} metric on the benchmark's data set: "
            + str(s.details.get("gate") or "accelbench measured something else")
        )
    line, values = found
    short = [f"{k} {values[k]:.6g} < {t:g}" for k, t in model.accuracy_targets if k in values and values[k] < t]
    short += [f"{k} {values[k]:.6g} > {t:g}" for k, t in model.accuracy_upper if k in values and values[k] > t]
    missing = [k for k, _ in model.accuracy_targets if k not in values]
    why = []
    if short:
        why.append(f"its accuracy misses MLPerf's targets: {', '.join(short)}")
    if missing:
        why.append(f"accelbench recorded no {', '.join(missing)} for it")
    return line + "\n", "; ".join(why) or None


def _figure(s: Source, name: str) -> float | None:
    m = s.record.metrics.get(name)
    return float(m.value) if m is not None and isinstance(m.value, (int, float)) else None


def _metric(model: Model, s: Source) -> tuple[str, dict[str, float]] | None:
    """MLPerf's accuracy.txt line for the metrics accelbench computes as MLCommons' scripts do, and the values by
    the checker's names (None: accelbench computes no such metric for this model)."""
    keys = {k for k, _ in model.accuracy_targets}
    samples = s.details.get("samples")
    if keys == {"acc"}:  # vision/classification_and_detection/tools/accuracy-imagenet.py
        top1 = _figure(s, "top1")
        if top1 is None or not isinstance(samples, int):
            return None
        line = f"accuracy={100 * top1:.3f}%, good={round(top1 * samples)}, total={samples}"
        return line, {"acc": 100 * top1}
    if {"ROUGE1", "ROUGE2", "ROUGEL"} <= keys:  # language/llama3.1-8b/evaluation.py: a dict of strings
        rouge = s.details.get("rouge")
        rouge = rouge if isinstance(rouge, dict) else {}
        values = rouge.get("served") or (rouge.get("verdict") or {}).get("values")
        names = ("rouge1", "rouge2", "rougeL", "rougeLsum")
        if not isinstance(values, dict) or not all(isinstance(values.get(k), (int, float)) for k in names):
            return None
        out: dict[str, Any] = {k: f"{float(values[k]):.4f}" for k in names}
        found = {k.upper(): float(values[k]) for k in names}
        n = samples if isinstance(samples, int) else values.get("samples")
        chars = values.get("chars_per_sample")
        if isinstance(n, int) and isinstance(chars, (int, float)):
            out["gen_len"] = round(chars * n)
            out["gen_num"] = n
            found["GEN_LEN"] = float(out["gen_len"])
        return "\nResults\n\n" + repr(out), found
    return None


def _not_measured(model: Model, s: Source) -> str:
    """What an accuracy record measured, in words, with nothing MLCommons' patterns read as a metric."""
    d = s.details
    primary = s.record.primary_metric
    figures = []
    for name, m in s.record.metrics.items():
        if isinstance(m.value, (int, float)):
            words = name.replace("_", " ")
            unit = f" ({m.unit})" if m.unit and m.unit != words else ""
            figures.append(f"  {words} = {m.value:.6g}{unit}")
    lines = [
        f"NOT MLPERF'S ACCURACY. accelbench did not measure the {model.name} metric on the benchmark's data set",
        f"in this run ({s.record.run_id}, record {s.record.id[:8]}). What it measured instead:",
        f"  gate: {d.get('gate') or 'none recorded'}",
        f"  answers judged against: {d.get('labels') or 'not recorded'}",
        f"  samples: {d.get('samples') if d.get('samples') is not None else 'not recorded'}",
        *figures,
        f"  primary figure: {(primary or 'none').replace('_', ' ')}",
        f"  weights: {record_weights(s)}",
        "An agreement with FP32 on synthetic samples says the serving path kept the model's answers; it says",
        "nothing of the model's quality on the data set, so no line here is MLPerf's metric and the checker",
        f"reports this result's accuracy as missing. Score it on the data set ({_how_to_score(s)}).",
    ]
    return "\n".join(lines) + "\n"


def _how_to_score(s: Source) -> str:
    if s.record.benchmark == "infer/llm":
        return "--source mlperf --mlperf-data DIR with the reference weights in --checkpoint"
    return "--dataset DIR with the reference weights in --checkpoint"
