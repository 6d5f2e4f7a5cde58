"""The user's settings file: ``$ACCELBENCH_HOME/config.toml`` (else the XDG config directory).

Only facts about the user's machine live here, never benchmark parameters::

    # ~/.config/accelbench/config.toml: one way of pricing this machine (see accelbench.cost.price)
    price_per_hour = 3.06   # USD per hour, or instance = "p5.48xlarge" (the shipped, dated table), or
    # purchase_price = 30000 with amortize_years = 3 [power_cost_kwh = 0.15 with board_watts = 700]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def config_path() -> Path:
    home = os.environ.get("ACCELBENCH_HOME")
    if home:
        return Path(home).expanduser() / "config.toml"
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "accelbench" / "config.toml"


def load() -> dict[str, Any]:
    path = config_path()
    if not path.is_file():
        return {}
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        return data
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML ({exc}); fix or remove it") from None
