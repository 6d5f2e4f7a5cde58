"""MLCommons' accuracy-log truncation, as ``tools/submission/truncate_accuracy_log.py`` does it, in our own code.

A submission keeps only the first and last 4096 characters of ``mlperf_log_accuracy.json`` (a full log runs to
megabytes), and proves which log it was cut from by the SHA-256 of the whole file, appended to ``accuracy.txt`` as
a ``hash=`` line. The checker reads only that the log is at most 10 KiB and that the line exists
(docs/mlperf-rules.md §5), so the hash is the one record of the original: it is taken before anything is cut.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: what the truncation keeps from each end of the log (``VIEWABLE_SIZE``)
VIEWABLE = 4096
#: the largest accuracy log the checker accepts (``MAX_ACCURACY_LOG_SIZE``)
MAX_LOG_BYTES = 10 * 1024
#: what stands between the two ends of a truncated log
GAP = b"\n\n...\n\n"
HASH_LINE = re.compile(r"^hash=([\w\d]+)$")


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, hex, read in blocks (a full accuracy log can be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cut(data: bytes) -> bytes:
    """The truncated form of a log: unchanged under 4096 bytes, else its first and last 4096 with ``GAP`` between
    (MLCommons reads characters; LoadGen's log is ASCII, where characters and bytes are the same)."""
    if len(data) < VIEWABLE:
        return data
    return data[:VIEWABLE] + GAP + data[len(data) - VIEWABLE :]


def hash_in(accuracy_txt: Path) -> str | None:
    """The ``hash=`` value an accuracy.txt already holds, if any."""
    if not accuracy_txt.is_file():
        return None
    for line in accuracy_txt.read_text(encoding="utf-8").splitlines():
        m = HASH_LINE.match(line)
        if m:
            return m.group(1)
    return None


def truncate(accuracy_json: Path, accuracy_txt: Path) -> str:
    """Truncate ``accuracy_json`` in place and append its hash to ``accuracy_txt`` (which must exist: MLCommons'
    tool skips a folder without one); returns the hash. A log already hashed and under 10 KiB is left as it is,
    as MLCommons' tool leaves it, and its recorded hash returned."""
    if not accuracy_txt.is_file():
        raise FileNotFoundError(f"{accuracy_txt} is missing: write accuracy.txt before truncating its log")
    known = hash_in(accuracy_txt)
    if known and accuracy_json.stat().st_size < MAX_LOG_BYTES:
        return known
    value = sha256_of(accuracy_json)
    with accuracy_txt.open("a", encoding="utf-8") as f:
        f.write(f"\nhash={value}\n")
    accuracy_json.write_bytes(cut(accuracy_json.read_bytes()))
    return value
