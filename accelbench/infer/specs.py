"""Parameters of the LoadGen inference benchmark (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.errors import UsageError
from accelbench.params import CommonParams, opt, positive

SCENARIOS = ("offline", "server", "singlestream", "multistream")
BACKENDS = ("torch", "null")
PROFILES = ("quick", "official")
INFER_PRECISIONS = ("fp32", "amp_fp16", "amp_bf16")


@dataclass(frozen=True)
class InferParams(CommonParams):
    """Serve ``model`` to LoadGen in one scenario and record LoadGen's own verdict and figures."""

    model: str = opt("resnet50", "model name (accelbench list --models)", sweep=False)
    scenario: str = opt("offline", "LoadGen scenario", choices=SCENARIOS)
    backend: str = opt(
        "torch", "torch (eager PyTorch), or null (returns at once: the harness's own limit)", choices=BACKENDS
    )
    precision: str = opt("fp32", "fp32, amp_fp16 or amp_bf16 (torch.autocast)", choices=INFER_PRECISIONS)
    batch_size: int = opt(8, "largest batch the system under test forms from waiting samples")
    max_wait_ms: float = opt(2.0, "Server: longest a sample waits for a batch to fill", sweep=False)
    profile: str = opt("quick", "quick (seconds; non-compliant) or official (LoadGen's 600 s rules)", choices=PROFILES)
    target_qps: float = opt(0.0, "Server: target queries/s (0: measured by a calibration probe)", sweep=False)
    latency_bound_ms: float = opt(0.0, "Server/MultiStream latency bound (0: the model's MLPerf bound)", sweep=False)
    samples_per_query: int = opt(8, "MultiStream: samples per query", sweep=False)
    duration: float = opt(0.0, "minimum run seconds (0: the profile's: 2 s quick, 600 s official)", sweep=False)
    scale: str = opt("full", "full (the published model) or tiny (a CPU test size)", choices=("full", "tiny"))

    def validate(self) -> None:
        from accelbench.workloads import model_info

        super().validate()
        if self.backend != "null":
            model_info(self.model)
        for name, allowed in (("scenario", SCENARIOS), ("backend", BACKENDS), ("profile", PROFILES)):
            if getattr(self, name) not in allowed:
                raise UsageError(f"unknown {name} {getattr(self, name)!r}: choose one of {', '.join(allowed)}")
        if self.precision not in INFER_PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r}: choose one of {', '.join(INFER_PRECISIONS)}")
        positive("--batch-size", self.batch_size)
        positive("--samples-per-query", self.samples_per_query)
        if self.latency_bound_ms < 0 or self.target_qps < 0 or self.duration < 0 or self.max_wait_ms < 0:
            raise UsageError("--latency-bound-ms, --target-qps, --duration and --max-wait-ms must not be negative")

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        words = [p["model"] if p.get("backend") != "null" else "null backend", p["scenario"]]
        words += [f"bs<={p['batch_size']}", p["precision"], p["profile"]]
        if p.get("scale", "full") != "full":
            words.append(p["scale"])
        return " ".join(words)
