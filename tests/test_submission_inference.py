"""``accelbench mlperf inference`` on real short runs: the tree has the folders and files MLCommons' submission
checker (v6.x) reads, the accuracy log truncated as MLCommons' tool does, an accuracy.txt that never dresses FP32
agreement on synthetic samples as MLPerf's metric, nothing of the machine's identity, and one-line refusals.

The checker is not run here (CI does not have it): its constants are written out below as
tools/submission/submission_checker/constants.py states them (mlcommons/inference HEAD b66003e1). The runs are
made once per module: resnet50 Offline and SingleStream, one resnet50 accuracy run (Offline; SingleStream's result
borrows it), llama3.1-8b Offline and its accuracy run, TEST01 of resnet50 Offline, TEST04 of resnet50 SingleStream
and TEST06 of llama3.1-8b Offline, all quick and tiny.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from accelbench.cli.main import main

# constants.py: REQUIRED_PERF_FILES, OPTIONAL_PERF_FILES, REQUIRED_ACC_FILES, REQUIRED_MEASURE_FILES,
# SYSTEM_IMP_REQUIRED_FILES, MAX_ACCURACY_LOG_SIZE, and the ACC_PATTERN entries of resnet and llama3.1-8b
REQUIRED_PERF_FILES = {"mlperf_log_summary.txt", "mlperf_log_detail.txt"}
OPTIONAL_PERF_FILES = {"mlperf_log_accuracy.json"}
REQUIRED_ACC_FILES = {"mlperf_log_summary.txt", "mlperf_log_detail.txt", "accuracy.txt", "mlperf_log_accuracy.json"}
REQUIRED_MEASURE_FILES = {"user.conf", "README.md"}
REQUIRED_COMP_PER_FILES = {"mlperf_log_summary.txt", "mlperf_log_detail.txt"}
SYSTEM_IMP_REQUIRED_FILES = (
    "input_data_types",
    "retraining",
    "starting_weights_filename",
    "weight_data_types",
    "weight_transformations",
)
MAX_ACCURACY_LOG_SIZE = 10 * 1024
ACC_PATTERN = {
    "acc": r"^(?:\{\"accuracy|accuracy)[\": ]*=?\s*([\d\.]+).*",
    "ROUGE1": r".*'rouge1':\s+'?([\d.]+)'?.*",
    "ROUGE2": r".*'rouge2':\s+'?([\d.]+)'?.*",
    "ROUGEL": r".*'rougeL':\s+'?([\d.]+)'?.*",
    "ROUGELSUM": r".*'rougeLsum':\s+'?([\d.]+)'?.*",
    "GEN_LEN": r".*'gen_len':\s([\d.]+).*",
    "mAP": r".*(?:mAP=|'Total':)\s*([\d.]+)",
    "DICE": r"Accuracy\:\s*mean\s*=\s*([\d\.]+).*",
    "E2E_ACCURACY": r"Accuracy:\s*([\d\.]+)",
}
HASH = re.compile(r"^hash=([\w\d]+)$")

TINY = ["--scale", "tiny", "--threads", "1"]
LLAMA = ["llama3.1-8b", *TINY, "--input-tokens", "16", "--output-tokens", "4", "--expected-qps", "3000"]
#: each run: the accelbench infer arguments (the runs the tree is made of)
RUNS = {
    "resnet": ["resnet50", *TINY, "--scenario", "offline,singlestream", "--duration", "0.2"],
    "resnet-accuracy": ["resnet50", *TINY, "--mode", "accuracy"],
    "llama": [*LLAMA, "--mode", "performance,accuracy", "--duration", "0.1"],
    # compliance runs: TEST01 of resnet's Offline, TEST04 of its SingleStream, TEST06 of llama's Offline
    "resnet-test01": ["resnet50", *TINY, "--scenario", "offline", "--duration", "0.2", "--audit", "TEST01"],
    "resnet-test04": ["resnet50", *TINY, "--scenario", "singlestream", "--duration", "0.2", "--audit", "TEST04"],
    "llama-test06": [*LLAMA, "--duration", "0.1", "--audit", "TEST06"],
}
SYSTEM_TOML = """\
host_storage_type = "SSD"
host_memory_configuration = "not disclosed"
host_networking = "N/A"
host_networking_topology = "N/A"
cooling = "air"
host_network_card_count = "0"
"""
ORG, SYSTEM = "Acme", "cpu1"
RESULTS = [("resnet", "Offline"), ("resnet", "SingleStream"), ("llama3.1-8b", "Offline")]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The runs (each once), their ids, the store and a system TOML."""
    from accelbench.results.store import Store

    root = tmp_path_factory.mktemp("mlperf")
    db, out = root / "store.db", root / "runs"
    ids: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCELBENCH_HOME", str(root / "home"))
        mp.setenv("COLUMNS", "160")
        for name, args in RUNS.items():
            with Store(db) as store:
                before = {r.run_id for r in store.runs()}
            assert main(["infer", *args, "--db", str(db), "--out", str(out)]) == 0, name
            with Store(db) as store:
                (ids[name],) = {r.run_id for r in store.runs()} - before
    toml = root / "system.toml"
    toml.write_text(SYSTEM_TOML)
    return {"root": root, "db": db, "out": out, "ids": ids, "toml": toml}


def mlperf(made: dict[str, Any], *runs: str, out: Path, more: tuple[str, ...] = ()) -> int:
    args = ["mlperf", "inference", *runs, "-o", str(out), "--org", ORG, "--system", SYSTEM]
    return main([*args, "--system-toml", str(made["toml"]), "--db", str(made["db"]), *more])


@pytest.fixture(scope="module")
def tree(made: dict[str, Any]) -> dict[str, Any]:
    """The open-division tree of every run, and what the command printed."""
    import contextlib
    import io

    out = made["root"] / "tree"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert mlperf(made, *made["ids"].values(), out=out) == 0
    return {"root": out / "open" / ORG, "printed": printed.getvalue(), "out": out}


def _records(made: dict[str, Any]) -> list[Any]:
    from accelbench.results.store import Store

    with Store(made["db"]) as store:
        return store.query()


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_file()}


def test_the_tree_holds_each_result_where_the_checker_reads_it(tree: dict[str, Any]) -> None:
    root = tree["root"]
    assert (root / "src" / "README.md").is_file() and (root / "documentation" / "calibration.md").is_file()
    system = json.loads((root / "systems" / f"{SYSTEM}.json").read_text())
    assert system["submitter"] == ORG and system["division"] == "open" and system["system_name"] == SYSTEM
    assert system["system_type"] == "datacenter,edge"  # the narrowest category holding resnet and llama3.1-8b
    for model, scenario in RESULTS:
        folder = root / "results" / SYSTEM / model / scenario
        assert REQUIRED_MEASURE_FILES <= _files(folder) and "measurements.json" in _files(folder), folder
        tests = {"resnet": {"Offline": {"TEST01"}, "SingleStream": {"TEST04"}}, "llama3.1-8b": {"Offline": {"TEST06"}}}
        tests = tests[model].get(scenario)
        assert {p.name for p in folder.iterdir() if p.is_dir()} == {"performance", "accuracy"} | (tests or set())
        assert all((folder / f).stat().st_size > 0 for f in REQUIRED_MEASURE_FILES)
        run_1 = _files(folder / "performance" / "run_1")
        assert REQUIRED_PERF_FILES <= run_1 <= REQUIRED_PERF_FILES | OPTIONAL_PERF_FILES
        assert _files(folder / "accuracy") == REQUIRED_ACC_FILES
        measurements = json.loads((folder / "measurements.json").read_text())
        for key in SYSTEM_IMP_REQUIRED_FILES:
            assert isinstance(measurements[key], str) and measurements[key].strip(), (folder, key)
        assert measurements["retraining"] == "no"
        readme = (folder / "README.md").read_text()
        assert "accelbench infer " in readme and "not for submission:" in readme
    # the compliance folders as checks/compliance_check.py reads them (COMPLIANCE_PATH v6.x: in the scenario's)
    test04 = root / "results" / SYSTEM / "resnet" / "SingleStream" / "TEST04"
    assert _files(test04) == {"verify_performance.txt"}
    assert _files(test04 / "performance" / "run_1") == REQUIRED_COMP_PER_FILES
    last = (test04 / "verify_performance.txt").read_text().splitlines()[-1]
    assert last == "TEST PASS" or last.startswith("TEST FAIL: ")  # the verifier's verdict, as the checker reads it
    test06 = root / "results" / SYSTEM / "llama3.1-8b" / "Offline" / "TEST06"
    assert _files(test06) == {"verify_accuracy.txt"} and _files(test06 / "accuracy") == {"mlperf_log_accuracy.json"}
    verdict = (test06 / "verify_accuracy.txt").read_text().splitlines()
    assert "First token check pass: Skipped" in verdict and "Sample length check pass: True" in verdict
    resnet = root / "results" / SYSTEM / "resnet"
    assert {p.name for p in resnet.iterdir()} == {"Offline", "SingleStream"}
    conf = (resnet / "SingleStream" / "user.conf").read_text()
    assert "resnet50.SingleStream.min_duration = 200" in conf  # what the run gave LoadGen, by mlperf.conf's names


def test_test01s_sampled_answers_match_the_accuracy_runs(made: dict[str, Any], tree: dict[str, Any]) -> None:
    """A real model (ResNet-50, tiny): the TEST01 run serves the same calibrated random weights as the accuracy run
    and answers LoadGen in performance mode, so the answers it sampled match (accelbench.loadgen.verify.test01)."""
    test01 = tree["root"] / "results" / SYSTEM / "resnet" / "Offline" / "TEST01"
    assert "TEST PASS" in (test01 / "verify_accuracy.txt").read_text().splitlines()
    assert _files(test01) == {"verify_accuracy.txt", "verify_performance.txt"}
    assert {p.name for p in test01.iterdir() if p.is_dir()} == {"performance", "accuracy"}
    assert _files(test01 / "performance" / "run_1") == REQUIRED_COMP_PER_FILES
    assert _files(test01 / "accuracy") == {"mlperf_log_accuracy.json", "accuracy.txt"}  # accuracy.txt: for truncation
    [audit] = [r for r in _records(made) if r.details.get("audit") == "TEST01"]
    assert audit.details["answer_dtype"] == "int32"


def test_each_accuracy_log_is_truncated_with_the_hash_of_the_original(made: dict[str, Any], tree: dict[str, Any]):
    from accelbench.submission.truncate import GAP, VIEWABLE

    originals = {
        (r.params["model"], r.params["scenario"]): Path(r.details["loadgen_log_dir"]) / "mlperf_log_accuracy.json"
        for r in _records(made)
        if r.params.get("mode") == "accuracy"
    }
    which = {"resnet": ("resnet50", "offline"), "llama3.1-8b": ("llama3.1-8b", "offline")}
    for model, scenario in RESULTS:
        acc = tree["root"] / "results" / SYSTEM / model / scenario / "accuracy"
        log = acc / "mlperf_log_accuracy.json"
        assert log.stat().st_size <= MAX_ACCURACY_LOG_SIZE
        hashes = [m.group(1) for line in (acc / "accuracy.txt").read_text().splitlines() if (m := HASH.match(line))]
        original = originals[which[model]].read_bytes()
        assert hashes == [hashlib.sha256(original).hexdigest()]
        kept = log.read_bytes()
        if len(original) >= VIEWABLE:
            assert kept == original[:VIEWABLE] + GAP + original[-VIEWABLE:]
        else:
            assert kept == original


def test_agreement_on_synthetic_samples_is_never_written_as_mlperfs_accuracy(tree: dict[str, Any]) -> None:
    for model, scenario in RESULTS:
        text = (tree["root"] / "results" / SYSTEM / model / scenario / "accuracy" / "accuracy.txt").read_text()
        assert text.startswith("NOT MLPERF'S ACCURACY")
        for line in text.splitlines():
            assert not any(re.match(p, line) for p in ACC_PATTERN.values()), (model, line)
        assert "synthetic samples" in text


def test_the_summary_says_first_why_a_result_is_not_for_submission(tree: dict[str, Any]) -> None:
    printed = tree["printed"]
    for model, scenario in RESULTS:
        block = printed.split(f"\n{model} {scenario} ", 1)[1]
        lines = block.splitlines()
        assert lines[1].startswith("  not for submission: the quick profile is shorter than MLPerf's rules")
        assert "accuracy was not MLPerf's" in lines[1]
    assert "the closed division would still need: MLPerf's compliance test TEST01" in printed
    assert "resnet in MultiStream, Server (datacenter,edge)" in printed  # what a closed datacenter,edge tree needs
    assert "no accuracy run in SingleStream: its accuracy folder holds the Offline one's" in printed


def test_nothing_of_the_machines_identity_goes_into_the_tree(tree: dict[str, Any]) -> None:
    home = os.path.expanduser("~").rstrip("/")
    host = socket.gethostname()
    hosts = [re.compile(r"(?<![A-Za-z0-9])" + re.escape(h) + r"(?![A-Za-z0-9])") for h in {host, host.split(".")[0]}]
    for path in tree["out"].rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert home not in text, path
            assert not any(h.search(text) for h in hosts), path


def _copy_run(made: dict[str, Any], name: str, dest: Path, edit: Any) -> Path:
    """A copy of run ``name``'s folder whose records ``edit`` changes (a dict in, a dict out)."""
    folder = dest / made["ids"][name]
    shutil.copytree(made["out"] / made["ids"][name], folder)
    path = folder / "results.jsonl"
    lines = [json.dumps(edit(json.loads(line))) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("\n".join(lines) + "\n")
    return folder


def _refused(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("accelbench: error: "), err
    return err


def test_refusals_are_one_line(made: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = made["ids"]
    capsys.readouterr()

    def other_system(d: dict[str, Any]) -> dict[str, Any]:
        d["system"]["fingerprint"] = "0123456789abcdef"
        return d

    moved = _copy_run(made, "llama", tmp_path / "a", other_system)
    err = _refused(capsys, mlperf(made, ids["resnet"], str(moved), out=tmp_path / "t1"))
    assert "2 systems" in err and "0123456789abcdef" in err

    def resnet18(d: dict[str, Any]) -> dict[str, Any]:
        d["params"]["model"] = "resnet18"
        return d

    err = _refused(capsys, mlperf(made, str(_copy_run(made, "resnet", tmp_path / "b", resnet18)), out=tmp_path / "t2"))
    assert "resnet18" in err and "resnet50 (resnet)" in err and "llama3.1-8b (llama3.1-8b)" in err

    err = _refused(capsys, mlperf(made, ids["resnet"], ids["resnet-accuracy"], out=tmp_path / "t3", more=(
        "--division", "closed", "--system-type", "edge")))  # fmt: skip
    assert "missing MultiStream" in err

    def gone(d: dict[str, Any]) -> dict[str, Any]:
        d["details"]["loadgen_log_dir"] = str(tmp_path / "nowhere" / Path(d["details"]["loadgen_log_dir"]).name)
        return d

    folder = _copy_run(made, "resnet-accuracy", tmp_path / "c", gone)
    shutil.rmtree(folder / "logs")
    err = _refused(capsys, mlperf(made, ids["resnet"], str(folder), out=tmp_path / "t4"))
    assert "no LoadGen log folder on disk" in err
    assert not (tmp_path / "t1").exists() and not (tmp_path / "t4").exists()  # refused before anything is written


def test_mlperfs_metric_is_written_only_from_a_data_set_score() -> None:
    """A record scored on the data set's labels gets MLCommons' accuracy-imagenet.py line; a language model's ROUGE
    on MLPerf's own set its evaluation.py dict; both read back by the checker's patterns."""
    from accelbench.loadgen.mlcommons import ROUNDS
    from accelbench.results.record import Metric, Result
    from accelbench.submission.accuracy import accuracy_text
    from accelbench.submission.runs import Source

    model = ROUNDS["v6.1"].models["resnet"]
    scored = Result("infer/loadgen", {"model": "resnet50", "mode": "accuracy", "scenario": "offline"})
    scored.metrics["top1"] = Metric(value=0.765, unit="top1", higher_is_better=True)
    scored.details.update({"accuracy_verified": True, "labels": "dataset", "samples": 50000})
    text, why = accuracy_text(model, Source(scored, None))
    assert text == "accuracy=76.500%, good=38250, total=50000\n" and why is None
    assert float(re.match(ACC_PATTERN["acc"], text).group(1)) == 76.5
    scored.details["labels"] = "fp32-reference"
    text, why = accuracy_text(model, Source(scored, None))
    assert "accuracy=" not in text and why is not None

    llama = ROUNDS["v6.1"].models["llama3.1-8b"]
    served = Result("infer/llm", {"model": "llama3.1-8b", "mode": "accuracy", "scenario": "offline"})
    values = {"rouge1": 38.9, "rouge2": 15.9, "rougeL": 24.4, "rougeLsum": 35.6, "chars_per_sample": 550.0}
    served.details.update(
        {"accuracy_verified": True, "samples": 13368, "prompts": {"mlperf_benchmark": "llama3.1-8b"},
         "rouge": {"verdict": {"values": values}}}
    )  # fmt: skip
    text, why = accuracy_text(llama, Source(served, None))
    found = {k: re.match(ACC_PATTERN[k], text.splitlines()[-1]) for k in ("ROUGE1", "ROUGELSUM", "GEN_LEN")}
    assert {k: float(m.group(1)) for k, m in found.items() if m} == {
        "ROUGE1": 38.9, "ROUGELSUM": 35.6, "GEN_LEN": 550.0 * 13368,
    }  # fmt: skip
    assert why is None  # every target met, gen_len within its bound


def test_truncation_is_mlcommons(tmp_path: Path) -> None:
    from accelbench.submission.truncate import MAX_LOG_BYTES, truncate

    small, txt = tmp_path / "small.json", tmp_path / "small.txt"
    small.write_text("[]\n")
    txt.write_text("accuracy=1.000%\n")
    digest = truncate(small, txt)
    assert small.read_text() == "[]\n" and txt.read_text() == f"accuracy=1.000%\n\nhash={digest}\n"
    big, txt = tmp_path / "big.json", tmp_path / "big.txt"
    data = "".join(f'{{"seq_id": {i}, "qsl_idx": {i}, "data": "{i:08X}"}},\n' for i in range(2000)).encode()
    big.write_bytes(data)
    txt.write_text("")
    digest = truncate(big, txt)
    assert digest == hashlib.sha256(data).hexdigest()
    assert big.read_bytes() == data[:4096] + b"\n\n...\n\n" + data[-4096:] and big.stat().st_size <= MAX_LOG_BYTES
    assert truncate(big, txt) == digest and txt.read_text().count("hash=") == 1  # done once, as MLCommons' tool


def test_redaction_takes_the_host_name_standing_alone_not_inside_a_given_name(monkeypatch) -> None:
    """A host called ``vm`` is written HOST where it stands alone, but a system the user named ``cpu2-vm`` keeps
    its name (systems/cpu2-vm.json must say system_name cpu2-vm)."""
    import socket

    from accelbench.submission.output import redact

    monkeypatch.setattr(socket, "gethostname", lambda: "vm")
    assert redact("cpu2-vm on vm, vm.local, user@vm: kvm") == "cpu2-vm on HOST, HOST.local, user@HOST: kvm"
