"""What a search is made of: one candidate (its settings, key and label) and a stage's candidates (torch-free).

Below the task seam (:mod:`accelbench.tune.task`), the tasks' own spaces and the generic stages
(:mod:`accelbench.tune.space`), so none imports another for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def split_list(text: str) -> list[str]:
    """A comma-separated flag's items (``--precisions fp32,bf16``)."""
    return [t.strip() for t in text.split(",") if t.strip()]


@dataclass(frozen=True)
class Candidate:
    """One combination of settings: the fields of the family's parameters that the search varies."""

    settings: dict[str, Any] = field(hash=False)

    @property
    def key(self) -> str:
        return ",".join(f"{k}={self.settings[k]}" for k in sorted(self.settings))

    def with_(self, **changes: Any) -> "Candidate":
        return Candidate(self.settings | changes)

    @property
    def compiles(self) -> bool:
        """Whether its trial compiles first (torch.compile: seconds to minutes before the first figure)."""
        s = self.settings
        return bool(s.get("compile") or s.get("engine_compile")) or s.get("backend") == "compile"

    def label(self) -> str:
        """The settings in a few words, only what differs from the family's defaults beside the runtime."""
        s = self.settings
        if "engine" in s:  # a language model's serving (infer/llm)
            words = [s["engine"], s["precision"]] + (["compiled"] if s.get("engine_compile") else [])
            words.append(f"{s['batch_size']} in flight")
            words += [f"{s['max_batch_tokens']} tokens a step"] if s.get("max_batch_tokens") else []
            return " ".join(words)
        if "backend" in s:
            words = [s["backend"], s["precision"]]
            words += ["channels_last"] if s.get("channels_last") else []
            words.append(f"bs {s['batch_size']}")
            words += [f"x{s['streams']} in flight"] if s.get("streams", 1) > 1 else []
            words += [s["compile_mode"]] if s.get("compile_mode", "default") != "default" else []
            words += [f"{s['threads']} threads"] if s.get("threads") else []
            return " ".join(words)
        words = [s["precision"]] + [w for w in ("channels_last", "compile") if s.get(w)]
        words += [s["compile_mode"]] if s.get("compile_mode", "default") != "default" else []
        return " ".join(words + [f"bs {s['batch_size']}"])


@dataclass
class Space:
    """The candidates of a stage, and the ones left out with why."""

    candidates: list[Candidate]
    left_out: list[tuple[Candidate, str]]
