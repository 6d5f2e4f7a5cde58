"""accelbench tune's tasks: one object per benchmark searched, chosen by the model as ``accelbench infer MODEL`` and
``accelbench train MODEL`` choose their benchmark, owning its flags (a flag of another task refused in one line),
its space and its gate's words; the search itself names no task, and older search records read as today's."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

import accelbench
from accelbench import registry
from accelbench.errors import UsageError
from accelbench.families import benchmark_of
from accelbench.params import build_params
from accelbench.results.record import SCHEMA_VERSION, Result
from accelbench.tune.specs import TuneParams
from accelbench.tune.task import builtin_tasks, route

TUNE = Path(accelbench.__file__).parent / "tune"
MODELS = ("resnet18", "ncf", "llama3.1-8b", "mixtral-8x7b")


def _task_tests(tree: ast.AST) -> list[str]:
    """Every comparison of something named ``task`` (``task ==``, ``params.task in``, ``"x" != p.task``)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            name = side.attr if isinstance(side, ast.Attribute) else side.id if isinstance(side, ast.Name) else ""
            if name == "task":
                found.append(ast.unparse(node))
    return found


def test_the_search_switches_on_no_task() -> None:
    """What differs by benchmark is its task object's: no module of tune/ compares a task."""
    modules = sorted(TUNE.glob("*.py"))
    assert modules
    found = {
        path.name: tests for path in modules if (tests := _task_tests(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {}
    assert _task_tests(ast.parse('if params.task == "serve" or "x" in task: pass'))  # the walk sees both forms


@pytest.mark.parametrize("model", MODELS)
def test_the_model_chooses_the_task_as_the_registry_routes_it(model: str) -> None:
    """Each task is the registry's benchmark of its command, and ``--task``'s command with a model gives the task of
    the benchmark the registry routes that model to."""
    for task in builtin_tasks():
        assert benchmark_of(task.params) == task.name
        assert registry.get(task.name).offered_as.name == task.command
    for command in ("infer", "train"):
        first = registry.sharing_command(command)[0].name
        assert route(command, model).name == registry.route(first, {"model": model})


def tune(**values: Any) -> TuneParams:
    return build_params(TuneParams, {"scale": "tiny", "budget": "10m"} | values, "tune")


def test_each_task_records_only_its_own_flags_and_reads_them_back() -> None:
    image = tune(model="resnet18", scenario="server", backends="torch")
    language = tune(model="llama3.1-8b", tpot_ms=20.0, engines="static")
    training = tune(model="ncf", task="train")
    assert image.tunes == "infer/loadgen" and language.tunes == "infer/llm" and training.tunes == "train/throughput"
    assert {"scenario": "server", "backends": "torch"}.items() <= image.to_dict().items()
    assert {"engines": "static", "tpot_ms": 20.0}.items() <= language.to_dict().items()
    assert "engines" not in image.to_dict() and "scenario" not in language.to_dict()
    assert not {"scenario", "engines", "checkpoint"} & set(training.to_dict())
    for p in (image, language, training):
        assert build_params(TuneParams, p.to_dict(), "tune") == p  # a record's params build the same search
    assert TuneParams.describe(image.to_dict()) == "resnet18 infer server budget 10m tiny"
    assert TuneParams.describe(language.to_dict()) == "llama3.1-8b infer TPOT 20 ms budget 10m tiny"


@pytest.mark.parametrize(
    "values, words",
    [
        ({"model": "resnet18", "tpot_ms": 20.0}, "--tpot-ms applies to the infer/llm benchmark, not infer/loadgen"),
        ({"model": "llama3.1-8b", "dataset": "/d"}, "--dataset applies to the infer/loadgen benchmark, not infer/llm"),
        ({"model": "ncf", "task": "train", "checkpoint": "/c"}, "--checkpoint applies to the infer/loadgen, "),
        ({"model": "llama3.1-8b", "task": "serve"}, "--task serve is now --task infer: .*llama3.1-8b: infer/llm"),
        ({"model": "resnet18", "task": "tune"}, "unknown task 'tune': choose one of infer, train"),
        ({"model": "llama3.1-8b", "task": "train"}, "llama3.1-8b trains as train/llm, whose settings"),
    ],
)
def test_a_setting_of_another_task_is_refused(values: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        tune(**values)


def test_the_command_refuses_another_task_s_flag_in_one_line(tmp_path: Path, cli_env: dict[str, str]) -> None:
    for args, words in (
        (["resnet18", "--engines", "static"], "--engines applies to the infer/llm benchmark, not infer/loadgen"),
        (["llama3.1-8b", "--task", "serve"], "--task serve is now --task infer"),
    ):
        out = run_cli(["tune", *args, "--scale", "tiny", "--dry-run"], cli_env, tmp_path)
        assert out.returncode == 2 and words in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def _older(params: dict[str, Any]) -> Result:
    """A search record as accelbench wrote it before the tasks owned their flags: every task's, at its default
    unless given."""
    every = {"scenario": "offline", "backends": "", "checkpoint": "", "engines": "", "tpot_ms": 0.0, "prompts": ""}
    search = {"scale": "tiny", "emulated": False, "device": "cpu", "threads": None, "budget": "10m", "precisions": ""}
    search |= {"batch_sizes": "", "compile": True, "finalists": 3, "repeats": 3, "dataset": ""}
    record = {"schema_version": SCHEMA_VERSION, "benchmark": "tune/search", "status": "ok"}
    return Result.from_dict(record | {"params": search | every | params})


@pytest.mark.parametrize(
    "older, today",
    [
        ({"model": "llama3.1-8b", "task": "serve", "tpot_ms": 20.0}, {"model": "llama3.1-8b", "tpot_ms": 20.0}),
        ({"model": "resnet18", "task": "infer", "scenario": "server"}, {"model": "resnet18", "scenario": "server"}),
        ({"model": "ncf", "task": "train"}, {"model": "ncf", "task": "train"}),
    ],
)
def test_an_older_search_record_reads_as_today_s(older: dict[str, Any], today: dict[str, Any]) -> None:
    read = _older(older)
    assert read.params == tune(device="cpu", **today).to_dict()
    assert TuneParams.describe(read.params).startswith(f"{today['model']} {today.get('task', 'infer')}")
    assert Result.from_dict(read.to_dict() | {"schema_version": SCHEMA_VERSION}).params == read.params  # once
