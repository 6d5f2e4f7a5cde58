"""MLPerf's compliance tests as LoadGen audit runs: the ``audit.config`` each test hands LoadGen (the values
MLCommons' compliance READMEs and audit.config files state, compliance/TEST0X/ in mlcommons/inference), and which
models a test applies to. A compliance run is a performance run under that file; :mod:`accelbench.loadgen.verify`
judges its logs against the accuracy and performance runs as the tests define."""

from __future__ import annotations

from pathlib import Path

from accelbench.loadgen.mlcommons import AUDITS, ROUNDS, SCENARIO_DIRS, Model, model_of

#: the accuracy-log sampling seed every MLCommons audit.config sets
ACCURACY_LOG_SEED = 720381539243781796
#: TEST06's own: 100 sampled answers of at least 100 queries, no minimum duration, equal-issue mode off
TEST06_SAMPLES = 100
#: TEST04 repeats this one sample for every query (``performance_issue_same_index``)
TEST04_SAME_INDEX = 3

HEADER = (
    "# written by accelbench for MLPerf's {test} (the values of mlcommons/inference compliance/{test}/)\n"
    "# mode 2 = performance only\n"
)


def applies_to(test: str) -> list[str]:
    """The MLPerf models (the checker's names) ``test`` applies to in any round accelbench knows."""
    return sorted({m.name for r in ROUNDS.values() for m in r.models.values() if test in m.tests})


def model_for(test: str, accelbench_model: str) -> Model | None:
    """The MLPerf model ``accelbench_model`` is, where ``test`` applies to it (None: MLCommons does not apply it)."""
    for name in ROUNDS:
        model = model_of(accelbench_model, name)
        if model is not None and test in model.tests:
            return model
    return None


def refusal(test: str, accelbench_model: str, mode: str, scenario: str) -> str | None:
    """Why ``test`` cannot run for this model, mode and scenario, in words with the fix (None: it can)."""
    if test not in AUDITS:
        return f"--audit {test}: accelbench runs {', '.join(AUDITS)}"
    if mode != "performance":
        return f"--audit {test} is a performance run in LoadGen's audit mode: drop --mode {mode}"
    if scenario not in SCENARIO_DIRS:
        return f"--audit {test} is a LoadGen test: use one of LoadGen's scenarios, not {scenario}"
    if model_for(test, accelbench_model) is None:
        names = ", ".join(applies_to(test)) or "none accelbench serves"
        return (
            f"MLCommons does not apply {test} to {accelbench_model} (it applies to {names}; "
            f"mlcommons/inference compliance/{test})"
        )
    return None


def config_text(test: str, model: Model, scenario: str) -> str:
    """The audit.config for ``test`` of ``model`` in accelbench's ``scenario``, in LoadGen's ``model.scenario.key``
    form (``*``: every model, as MLCommons writes them)."""
    head = HEADER.format(test=test)
    if test == "TEST01":
        lines = [
            "*.*.mode = 2",
            f"*.*.accuracy_log_rng_seed = {ACCURACY_LOG_SEED}",
            f"*.*.accuracy_log_sampling_target = {model.test01_sampling}",
        ]
    elif test == "TEST04":
        scen = SCENARIO_DIRS["server" if scenario == "interactive" else scenario]
        lines = [
            f"*.{scen}.mode = 2",
            f"*.{scen}.performance_issue_unique = 0",
            f"*.{scen}.performance_issue_same = 1",
            f"*.{scen}.performance_issue_same_index = {TEST04_SAME_INDEX}",
        ]
    elif test == "TEST06":
        lines = [
            "*.*.mode = 2",
            f"*.*.accuracy_log_rng_seed = {ACCURACY_LOG_SEED}",
            f"*.*.accuracy_log_sampling_target = {TEST06_SAMPLES}",
            f"*.*.min_query_count = {TEST06_SAMPLES}",
            "*.*.min_duration = 0",
            "*.*.sample_concatenate_permutation = 0",
        ]
    else:
        raise ValueError(f"unknown compliance test {test}")
    return head + "\n".join(lines) + "\n"


def config_path(outdir: Path, test: str, model_name: str, scenario: str) -> Path:
    """Write the audit.config of ``test`` into a run's log folder and return it; where ``test`` is empty, the path
    of one that does not exist (LoadGen then reads none: a stray audit.config in the working directory must not
    alter a run)."""
    if not test:
        return outdir / "no-audit.config"
    model = model_for(test, model_name)
    if model is None:
        raise ValueError(f"{test} does not apply to {model_name}")
    path = outdir / "audit.config"
    path.write_text(config_text(test, model, scenario), encoding="utf-8")
    return path
