"""How text reaches a submission tree: under the file names MLCommons' submission checker reads, and with nothing of
the machine's identity (the user's home folder, the host's name), since the tree is written for others to read.

Every file the tree holds that is not a verbatim copy of the accuracy log is written through :func:`write_text` or
:func:`copy_logs`, so that redaction happens in one place.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Sequence

#: the files of a result's performance/run_1 and accuracy folders (REQUIRED_PERF_FILES, REQUIRED_ACC_FILES)
SUMMARY, DETAIL, ACCURACY_LOG, ACCURACY_TXT = (
    "mlperf_log_summary.txt",
    "mlperf_log_detail.txt",
    "mlperf_log_accuracy.json",
    "accuracy.txt",
)
PERF_FILES = (SUMMARY, DETAIL)
ACC_FILES = (SUMMARY, DETAIL, ACCURACY_TXT, ACCURACY_LOG)
#: the files in each result's own folder (REQUIRED_MEASURE_FILES and MEASUREMENTS_PATH v6.x)
MEASURE_FILES = ("user.conf", "README.md", "measurements.json")


def _secrets() -> list[tuple[re.Pattern[str], str]]:
    out = []
    home = os.path.expanduser("~")
    if home and home not in ("/", "~") and len(home) > 1:
        out.append((re.compile(re.escape(home.rstrip("/")) + r"(?=/|\b|$)"), "~"))
    host = socket.gethostname()
    if host:
        for name in {host, host.split(".")[0]}:
            if name:
                # a name standing alone: not a part of another name ("vm" in a system called cpu2-vm)
                out.append((re.compile(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])"), "HOST"))
    return out


def redact(text: str) -> str:
    """``text`` with the user's home folder written ``~`` and the host's name ``HOST``: nothing of the machine's
    identity goes into a tree another person reads."""
    for pattern, by in _secrets():
        text = pattern.sub(by, text)
    return text


def write_text(path: Path, text: str) -> None:
    """Write ``text``, redacted, to ``path`` (its folders made as needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(redact(text), encoding="utf-8")


def copy_logs(src: Path, dst: Path, names: Sequence[str]) -> None:
    """Copy the text logs ``names`` from ``src`` into ``dst``, redacted."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in names:
        text = (src / name).read_text(encoding="utf-8", errors="replace")
        (dst / name).write_text(redact(text), encoding="utf-8")
