"""MLPerf Inference's rounds as MLCommons' submission checker states them: each round's LoadGen seeds, its models
(the checker's names, mlperf.conf's names, the scenarios a system type must submit, the sample counts, the
compliance tests), so that a run can say which round it belongs to and a submission tree holds what that round's
checker reads. Values read from mlcommons/inference (tools/submission/submission_checker/constants.py, HEAD
b66003e1; docs/mlperf-rules.md), in no benchmark's terms: accelbench's model names map in ``ACCELBENCH``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

#: the scenario names of MLCommons' tree and logs, by accelbench's ``--scenario``
SCENARIO_DIRS = {
    "offline": "Offline",
    "server": "Server",
    "singlestream": "SingleStream",
    "multistream": "MultiStream",
    "interactive": "Interactive",
}
#: the compliance tests accelbench runs through LoadGen's audit mode
AUDITS = ("TEST01", "TEST04", "TEST06")


@dataclass(frozen=True)
class Seeds:
    """The three seeds a round's mlperf.conf sets (user.conf cannot: LoadGen reads them from its own conf only)."""

    qsl: int
    sample_index: int
    schedule: int


@dataclass(frozen=True)
class Model:
    """One model of a round, as the checker names and judges it."""

    name: str  #: the checker's (and the tree's) name: ``resnet``, ``llama3.1-8b``
    conf: str  #: mlperf.conf's name for it: ``resnet50``, ``llama3_1-8b``
    dataset_size: int  #: the samples an accuracy run must score (``dataset-size`` / ``accuracy-sample-count``)
    performance_samples: int  #: the least ``performance_sample_count``
    #: the least samples in closed Offline's one query (``OFFLINE_MIN_SPQ_SINCE_V4``; mlperf.conf's min_query_count)
    offline_samples: int
    #: the scenarios a system of each type must submit (``required-scenarios-*``; empty: not in that category)
    required: Mapping[str, tuple[str, ...]]
    #: scenarios of which at least one is needed beside the required ones (``optional-scenarios-*``)
    optional: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tests: tuple[str, ...] = ()  #: the compliance tests the closed division needs (``models_TEST0X``)
    #: TEST01's ``accuracy_log_sampling_target`` (compliance/TEST01/<model>/audit.config)
    test01_sampling: int = 0
    #: the Server latency constraint the checker holds (ns; ``latency-constraint``), if any
    server_latency_ns: int | None = None
    #: TTFT and TPOT p99 limits (ns) for Server and Interactive (``LLM_LATENCY_LIMITS``), if a language model
    token_limits_ns: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: the accuracy targets (metric key in accuracy.txt, least value) and upper limits (``accuracy-target``)
    accuracy_targets: tuple[tuple[str, float], ...] = ()
    accuracy_upper: tuple[tuple[str, float], ...] = ()

    def needs(self, system_type: str) -> tuple[str, ...]:
        """The scenarios a system of ``system_type`` (``datacenter``, ``edge``, ``datacenter,edge``) must submit."""
        return self.required.get(system_type, ())


@dataclass(frozen=True)
class Round:
    name: str
    seeds: Seeds
    models: Mapping[str, Model]


_DC, _EDGE, _BOTH = "datacenter", "edge", "datacenter,edge"
_RESNET = Model(
    "resnet",
    "resnet50",
    dataset_size=50000,
    performance_samples=1024,
    offline_samples=24576,
    required={
        _EDGE: ("SingleStream", "MultiStream", "Offline"),
        _BOTH: ("SingleStream", "MultiStream", "Offline", "Server"),
    },
    tests=("TEST01", "TEST04"),
    test01_sampling=4096,
    server_latency_ns=15_000_000,
    accuracy_targets=(("acc", 75.6954),),
)
_LLAMA31_8B = Model(
    "llama3.1-8b",
    "llama3_1-8b",
    dataset_size=13368,
    performance_samples=13368,
    offline_samples=13368,
    required={_DC: ("Offline",), _BOTH: ("Offline",)},
    optional={_DC: ("Interactive", "Server"), _BOTH: ("Interactive", "Server")},
    tests=("TEST06",),
    server_latency_ns=20_000_000_000,
    token_limits_ns={"Server": (2_000_000_000, 100_000_000), "Interactive": (500_000_000, 30_000_000)},
    accuracy_targets=(
        ("ROUGE1", 38.391408),
        ("ROUGE2", 15.748425),
        ("ROUGEL", 24.250743),
        ("ROUGELSUM", 35.43507),
        ("GEN_LEN", 7350879.6),
    ),
    accuracy_upper=(("GEN_LEN", 8984408.4),),
)
_BERT = Model(
    "bert-99",
    "bert",
    dataset_size=10833,
    performance_samples=10833,
    offline_samples=10833,
    required={_EDGE: ("SingleStream", "Offline"), _BOTH: ("SingleStream", "Offline")},
    tests=("TEST01",),
    test01_sampling=4096,
    accuracy_targets=(("F1", 89.96526),),
)
_UNET = Model(
    "3d-unet-99",
    "3d-unet",
    dataset_size=43,
    performance_samples=43,
    offline_samples=43,
    required={_DC: ("Offline",), _EDGE: ("SingleStream", "Offline"), _BOTH: ("SingleStream", "Offline")},
    tests=("TEST01",),
    test01_sampling=64,
    accuracy_targets=(("DICE", 0.853083),),
)
_SEEDS_V60 = Seeds(2465351861681999779, 14276810075590677512, 3936089224930324775)
_SEEDS_V61 = Seeds(2085463073848966840, 2747215439041700203, 16159082839903944936)
ROUNDS = {
    "v6.0": Round("v6.0", _SEEDS_V60, {m.name: m for m in (_RESNET, _LLAMA31_8B, _BERT, _UNET)}),
    "v6.1": Round("v6.1", _SEEDS_V61, {m.name: m for m in (_RESNET, _LLAMA31_8B, _BERT, _UNET)}),
}
#: accelbench's model names -> the names mlperf.conf (LoadGen's own copy) gives them, retired benchmarks included;
#: the other models get mlperf.conf's "*" rules
CONF_NAMES = {
    "resnet50": "resnet50",
    "bert": "bert",
    "bert-large": "bert",
    "dlrm": "dlrm-v2",
    "rnnt": "rnnt",
    "unet3d": "3d-unet",
}
#: accelbench's model names -> the checker's (the models accelbench serves that MLPerf Inference has)
ACCELBENCH = {
    "resnet50": "resnet",
    "bert": "bert-99",
    "bert-large": "bert-99",
    "unet3d": "3d-unet-99",
    "llama3.1-8b": "llama3.1-8b",
}


def round_of(detail: Mapping[str, Any]) -> str | None:
    """The round whose seeds a LoadGen detail log shows (None: no round's: a LoadGen no round accepts)."""
    got = (
        detail.get("effective_qsl_rng_seed"),
        detail.get("effective_sample_index_rng_seed"),
        detail.get("effective_schedule_rng_seed"),
    )
    for name, r in ROUNDS.items():
        if got == (r.seeds.qsl, r.seeds.sample_index, r.seeds.schedule):
            return name
    return None


def model_of(accelbench_model: str, round_name: str) -> Model | None:
    """The round's model an accelbench model is (None: MLPerf Inference has no such model in that round)."""
    name = ACCELBENCH.get(accelbench_model)
    return ROUNDS[round_name].models.get(name) if name else None
