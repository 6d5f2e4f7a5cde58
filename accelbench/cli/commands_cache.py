"""``accelbench cache``: what the export cache holds, and ``cache clear`` to empty it."""

from __future__ import annotations

import argparse
from typing import Any

from accelbench import cache
from accelbench.results import format as fmt


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "cache",
        help="the export cache (ONNX exports reused across runs): its size, or clear it",
        description=(
            "ONNX exports of the served models are kept across runs, keyed by the weights, the input shapes and "
            "the torch version, so a later run of the same model skips the export. Where: $ACCELBENCH_CACHE, "
            "else $ACCELBENCH_HOME/cache, else ~/.cache/accelbench. The least recently used files go first "
            "when the cache passes cache_max_gb (config.toml; default 5)."
        ),
    )
    parser.add_argument("action", nargs="?", choices=("show", "clear"), default="show", help="show (default) or clear")
    parser.set_defaults(handler=cmd_cache)


def cmd_cache(ns: argparse.Namespace) -> int:
    where = cache.cache_dir()
    if ns.action == "clear":
        gone = cache.clear()
        print(f"removed {gone.files} file(s), {fmt.bytes_(gone.bytes)}, from {where}")
        return 0
    used = cache.usage()
    cap = cache.max_bytes()
    print(f"{where}: {used.files} file(s), {fmt.bytes_(used.bytes)} of a {fmt.bytes_(cap)} cap")
    return 0
