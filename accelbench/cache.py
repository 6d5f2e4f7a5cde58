"""The export cache: ONNX exports kept across runs, keyed by what they depend on, within a size cap.

An export of ResNet-50 takes 10 s and 100 MB; a search, or the same model served again tomorrow, needs the
same file. Kept here, not in the system's temporary folder: ``$ACCELBENCH_CACHE``, else
``$ACCELBENCH_HOME/cache``, else the XDG cache directory. The least recently used files go first when the
cache passes its cap (``cache_max_gb`` in config.toml, default :data:`DEFAULT_MAX_GB`); ``accelbench cache
clear`` empties it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from accelbench import config
from accelbench.errors import UsageError

DEFAULT_MAX_GB = 5.0


def cache_dir() -> Path:
    """Where the cache lives (nothing is created here)."""
    if os.environ.get("ACCELBENCH_CACHE"):
        return Path(os.environ["ACCELBENCH_CACHE"]).expanduser()
    if os.environ.get("ACCELBENCH_HOME"):
        return Path(os.environ["ACCELBENCH_HOME"]).expanduser() / "cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "accelbench"


def exports_dir() -> Path:
    return cache_dir() / "exports"


def max_bytes() -> int:
    """The cap, from config.toml's ``cache_max_gb`` (a bad value is the config's one-line error)."""
    value = config.load().get("cache_max_gb", DEFAULT_MAX_GB)
    if not isinstance(value, (int, float)) or value < 0:
        raise UsageError(f"cache_max_gb in {config.config_path()} must be a number of GB >= 0, got {value!r}")
    return int(value * 2**30)


@dataclass(frozen=True)
class Usage:
    files: int
    bytes: int


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []


def usage(root: Path | None = None) -> Usage:
    files = _files(root or cache_dir())
    return Usage(len(files), sum(p.stat().st_size for p in files))


def touch(path: Path) -> None:
    """Mark ``path`` as just used (the cap removes the least recently used first)."""
    os.utime(path)


def trim(root: Path | None = None, cap: int | None = None) -> Usage:
    """Remove the least recently used files until the cache fits ``cap``; what was removed."""
    cap = max_bytes() if cap is None else cap
    files = sorted(_files(root or cache_dir()), key=lambda p: p.stat().st_mtime)
    total = sum(p.stat().st_size for p in files)
    removed = Usage(0, 0)
    for p in files:
        if total <= cap:
            break
        size = p.stat().st_size
        p.unlink(missing_ok=True)
        total -= size
        removed = Usage(removed.files + 1, removed.bytes + size)
    return removed


def clear(root: Path | None = None) -> Usage:
    """Empty the cache; what was removed."""
    import shutil

    root = root or cache_dir()
    gone = usage(root)
    shutil.rmtree(root, ignore_errors=True)
    return gone
