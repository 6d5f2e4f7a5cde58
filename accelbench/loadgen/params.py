"""What every benchmark served under the MLPerf LoadGen takes (torch-free); each benchmark declares its own
choices of scenario and mode and the settings only it takes."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.errors import UsageError
from accelbench.loadgen.compliance import MIN_DURATION_MS
from accelbench.params import CommonParams, EmulatedParams, ScaleParams, opt

PROFILES = ("quick", "official")
#: samples LoadGen's library holds, by profile
QSL_SAMPLES = {"quick": 64, "official": 1024}


@dataclass(frozen=True)
class LoadGenParams(EmulatedParams, ScaleParams, CommonParams):
    """A model served to LoadGen in one scenario; LoadGen's own verdict and figures recorded."""

    flag_group = "LoadGen"

    model: str = opt("resnet50", "model name (accelbench list --models)", sweep=False)
    scenario: str = opt("offline", "LoadGen scenario")
    mode: str = opt("performance", "what the run measures")
    precision: str = opt("auto", "the served precision")
    batch_size: int = opt(8, "largest batch served at once")
    max_wait_ms: float = opt(2.0, "Server: longest a sample waits for a batch to fill", sweep=False)
    profile: str = opt(
        "quick", "quick (seconds; non-compliant) or official (LoadGen's mlperf.conf rules)", choices=PROFILES
    )
    target_qps: float = opt(0.0, "Server: target queries/s (0: measured by a calibration probe)", sweep=False)
    expected_qps: float = opt(0.0, "Offline: LoadGen's expected throughput (0: measured by the probe)", sweep=False)
    duration: float = opt(0.0, "minimum run seconds (0: the profile's: 2 s quick, 600 s official)", sweep=False)
    checkpoint: str = opt("", "the weights to serve (empty: random weights)", sweep=False, metavar="PATH")
    audit: str = opt(
        "",
        "an MLPerf compliance test: a performance run under that test's audit.config (TEST01, TEST04, TEST06; "
        "where MLCommons applies it to the model)",
        sweep=False,
        metavar="TEST",
    )
    loadgen_trace: bool = opt(
        False, "keep LoadGen's trace log (mlperf_log_trace.json, hundreds of MB on a fast run)", sweep=False
    )

    def validate(self) -> None:
        super().validate()
        if self.audit:
            from accelbench.loadgen.audit import refusal

            why = refusal(self.audit, self.model, self.mode, self.scenario)
            if why:
                raise UsageError(why)

    @property
    def effective_precision(self) -> str:
        """The precision served where ``auto`` was given (each benchmark says what its auto means)."""
        return "fp32" if self.precision == "auto" else self.precision

    @property
    def workers(self) -> int:
        """Workers taking LoadGen's samples at once (one engine: 1)."""
        return 1

    @property
    def devices_serving(self) -> int:
        """The devices the per-device figures divide by."""
        return 1

    @property
    def latency_bound(self) -> float:
        """The Server latency bound given in milliseconds (0: the model's own, or none)."""
        return 0.0

    def model_bound_ms(self) -> float:
        """The served model's own Server/MultiStream latency bound in milliseconds (0: none)."""
        return 0.0

    @property
    def query_samples(self) -> int:
        """Samples in one MultiStream query (1 where a benchmark has no MultiStream)."""
        return 1

    @property
    def min_duration(self) -> float:
        """A test's minimum seconds: ``--duration``, else the profile's (2 s quick, mlperf.conf's 600 s official)."""
        return self.duration or (MIN_DURATION_MS / 1000 if self.profile == "official" else 2.0)

    def planned_seconds(self) -> float | None:
        if self.mode != "performance":
            return None  # accuracy runs the data set once; find-peak's trials are counted by the search
        return self.min_duration
