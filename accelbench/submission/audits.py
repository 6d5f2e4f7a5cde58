"""A result's compliance folders (TEST01, TEST04, TEST06; docs/mlperf-rules.md §4): each audit run's logs where the
checker looks for them, and the files :mod:`accelbench.loadgen.verify` writes as MLCommons' verifiers would.

A test that could not be verified or did not pass is said as a reason the result is not for submission.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.errors import UsageError
from accelbench.submission.output import ACCURACY_LOG, ACCURACY_TXT, PERF_FILES, copy_logs, write_text
from accelbench.submission.plan import Pick
from accelbench.submission.runs import Source, record_reasons
from accelbench.submission.truncate import truncate

if TYPE_CHECKING:
    from accelbench.loadgen.verify import Verification


def write_audits(pick: Pick, folder: Path, perf_dir: Path) -> list[str]:
    """Each audit record's TEST0X folder (§4): its logs and the verifier's files; why a test did not pass."""
    why: list[str] = []
    for test, s in pick.audits.items():
        tdir = folder / test
        audit_dir = s.log_dir()
        why += [f"{test}: {w}" for w in record_reasons(s)[0]]
        if test in ("TEST01", "TEST04"):
            copy_logs(audit_dir, tdir / "performance" / "run_1", PERF_FILES)
        if test in ("TEST01", "TEST06") and (audit_dir / ACCURACY_LOG).is_file():
            (tdir / "accuracy").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(audit_dir / ACCURACY_LOG, tdir / "accuracy" / ACCURACY_LOG)
            if test == "TEST01":  # MLCommons' truncation walks TEST01 and needs its accuracy.txt
                write_text(
                    tdir / "accuracy" / ACCURACY_TXT,
                    f"TEST01: the answers LoadGen sampled from the audit run {s.record.run_id} (record "
                    f"{s.record.id[:8]}) in performance mode; verify_accuracy.txt compares them\n",
                )
                truncate(tdir / "accuracy" / ACCURACY_LOG, tdir / "accuracy" / ACCURACY_TXT)
        verdict = _verify(test, pick, s, perf_dir)
        if isinstance(verdict, str):
            why.append(f"{test} not verified: {verdict}")
            continue
        for name, text in verdict.files.items():
            target = (tdir / name).resolve()
            if tdir.resolve() not in target.parents:
                raise UsageError(f"the {test} verifier named a file outside its folder: {name!r}")
            write_text(target, text)
        if not verdict.passed:
            why.append(f"{test} failed: {'; '.join(verdict.why)}")
    return why


def _verify(test: str, pick: Pick, s: Source, perf_dir: Path) -> Verification | str:
    """The verifier's verdict on an audit record, or why there is none."""
    from accelbench.loadgen import verify

    audit_dir = s.log_dir()
    dtype = str(s.details.get("answer_dtype") or (pick.accuracy.details.get("answer_dtype") if pick.accuracy else "")
                or "int32")  # fmt: skip
    try:
        if test == "TEST01":
            if pick.accuracy is None or pick.accuracy_from:
                return "TEST01 compares the audit run's answers with an accuracy run in the same scenario: none"
            return verify.test01(pick.accuracy.log_dir(), perf_dir, audit_dir, dtype)
        if test == "TEST04":
            return verify.test04(perf_dir, audit_dir)
        if test == "TEST06":
            verdicts = [verify.test06(audit_dir, pick.scenario, eos, dtype) for eos in _eos_ids(s)]
            return next((v for v in verdicts if not v.passed), verdicts[-1])
    except UsageError as exc:
        return str(exc)
    return f"accelbench has no verifier for {test}"


def _eos_ids(s: Source) -> list[int | None]:
    """The end-of-sequence ids TEST06 counts at an answer's end: each the engine recorded (a model may have
    several; each is checked), else [None], which TEST06 reports as a check it could not make."""
    engine = s.details.get("engine")
    said = engine.get("eos_token_id") if isinstance(engine, dict) else None
    said = s.details.get("eos_token_id", said)
    ids = said if isinstance(said, list) else [said]
    found: list[int | None] = [i for i in ids if isinstance(i, int) and not isinstance(i, bool)]
    return found or [None]
