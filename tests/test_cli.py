import csv
import io
import json
import subprocess
import sys

import pytest
from conftest import run_cli

SUBCOMMANDS = [
    [],
    ["run"],
    ["kernels"],
    ["kernels", "gemm"],
    ["kernels", "conv"],
    ["kernels", "rnn"],
    ["kernels", "attention"],
    ["kernels", "sparse"],
    ["kernels", "membw"],
    ["kernels", "allreduce"],
    ["results"],
    ["results", "list"],
    ["results", "show"],
    ["results", "runs"],
    ["results", "export"],
    ["results", "import"],
    ["compare"],
    ["train"],
    ["system"],
    ["list"],
]


@pytest.mark.parametrize("words", SUBCOMMANDS, ids=lambda w: " ".join(w) or "top")
def test_help_is_complete(words, cli_env, tmp_path):
    # fast help is checked structurally (test_parsing_does_not_import_torch), not by a wall-clock bound
    p = run_cli([*words, "--help"], cli_env, tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("usage: accelbench")


def test_help_and_bad_input_in_a_real_process(cli_env, tmp_path):
    p = run_cli(["kernels", "gemm", "--help"], cli_env, tmp_path, process=True)
    assert p.returncode == 0 and p.stdout.startswith("usage: accelbench")
    for args, message in (BAD[0], BAD[4], BAD[-1]):
        p = run_cli(args, cli_env, tmp_path, process=True)
        assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_parsing_does_not_import_torch():
    code = (
        "import sys; from accelbench.cli.main import build_parser; "
        "build_parser().parse_args(['kernels', 'gemm', '--m', '8']); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


BAD = [
    (["frobnicate"], "invalid choice"),
    (["run", "kernels/gemmm"], "unknown benchmark"),
    (["run", "nosuchsuite"], "neither a suite"),
    (["run", "missing.toml"], "cannot read suite file"),
    (["kernels", "gemm", "--precision", "fp7"], "unknown precision"),
    (["kernels", "gemm", "--m", "0"], "positive integer"),
    (["kernels", "gemm", "--n", "-5"], "positive integer"),
    (["kernels", "gemm", "--k", "12,,3"], "empty element"),
    (["kernels", "gemm", "--device", "tpu"], "unknown device"),
    (["kernels", "gemm", "--threads", "0"], "positive integer"),
    (["kernels", "gemm", "--tag", "novalue"], "KEY=VALUE"),
    (["kernels", "gemm", "--min-time", "5", "--max-time", "1"], "--min-time"),
    (["run", "--retry-failed"], "only applies with --resume"),
    (["results", "export", "--format", "xml"], "invalid choice"),
    (["kernels", "gemm", "--set", "deepbench-all"], "unknown shape set"),
    (["kernels", "gemm", "--set", "deepbench-train", "--m", "5"], "gives the shapes"),
    (["kernels", "gemm", "--limit", "3"], "only applies with --set"),
    (["kernels", "gemm", "--m", "1,2", "--n", "1,2,3", "--sweep"], "same length"),
    (["kernels", "gemm", "--m", "9:1:x2"], "bad range"),
    (["kernels", "conv", "--w", "4", "--filter-w", "9"], "larger than the padded input"),
    (["kernels", "attention", "--heads", "5", "--width", "512"], "must divide"),
    (["kernels", "sparse", "--density", "0"], "(0, 1]"),
    (["kernels", "allreduce", "--nproc", "4096"], "--nproc 4096"),
    (["kernels", "gemm", "--graph", "--device", "cpu"], "needs a CUDA device"),
    (["train", "resnet51"], "did you mean 'resnet50'"),
    (["train", "resnet18", "--batch-size", "0"], "positive integer"),
    (["train", "resnet18", "--num-batches", "0"], "positive"),
    (["train", "ncf", "--channels-last"], "no 4-D image input"),
    (["train", "resnet18", "--precision", "tf32", "--device", "cpu"], "cannot run it"),
    (["tta", "digits", "--precision", "fp16"], "did you mean amp_fp16?"),
    (["tta", "digits", "--precision", "bf16"], "did you mean amp_bf16?"),
    (["kernels", "gemm", "--warmup-time", "-1"], "--warmup-time must not be negative"),
    (["train", "resnet18", "--nproc", "512"], "--nproc 512"),
    (["train", "resnet18", "--batch-size", "auto", "--nproc", "2"], "auto searches on one device"),
    (["train", "nomodule:Model"], "cannot load workload 'nomodule:Model'"),
    (["infer", "resnet50", "--backend", "nomodule:Backend"], "cannot load backend"),
    (["infer", "resnet50", "--backend", "int8", "--precision", "amp_fp16"], "runs int8, not amp_fp16"),
    (["tta", "digits", "--nproc", "512"], "--nproc 512"),
    (["tta", "digits", "--target", "1.5"], "outside top1's range"),
    # a part's flag for a part not chosen is refused at its default value too: it was typed, so it was meant
    (["infer", "llama3.1-8b", "--engine", "endpoint", "--kv-blocks", "0"], "--kv-blocks applies to the "),
    (["infer", "llama3.1-8b", "--engine", "endpoint", "--page-size", "16"], "not endpoint"),
    (["infer", "resnet18", "--backend", "torch", "--ort-optimization", "all"], "not torch"),
    (["tune", "resnet18", "--tpot-ms", "0", "--dry-run"], "--tpot-ms applies to the infer/llm benchmark"),
    # an unknown source says how to add one, as an unknown engine does
    (
        ["infer", "llama3.1-8b", "--source", "nosuch"],
        "unknown source 'nosuch': choose one of random, file, mlperf, trace, conversations, or package.module:Class",
    ),
    (
        ["infer", "llama3.1-8b", "--engine", "nosuch"],
        "unknown engine 'nosuch': choose one of transformers, static, vllm, endpoint, null, or package.module:Class",
    ),
]


@pytest.mark.parametrize("args, message", BAD, ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_bad_input_is_one_line_exit_2(args, message, cli_env, tmp_path):
    p = run_cli(args, cli_env, tmp_path)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert message in lines[0]
    assert "Traceback" not in p.stderr


def test_malformed_suite_file_and_unwritable_store(cli_env, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[benchmark]]\nname = 'kernels/gemm'\nparams = { m = -1 }\n")
    p = run_cli(["run", str(bad)], cli_env, tmp_path)
    assert p.returncode == 2 and "positive integer" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    blocker = tmp_path / "afile"
    blocker.write_text("")
    p = run_cli(["run", "selftest/ok", "--db", str(blocker / "x.db")], cli_env, tmp_path)
    assert p.returncode == 2 and "cannot write results store" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_gemm_end_to_end_then_results_export_import_compare(cli_env, tmp_path):
    fast = ["--min-time", "0.05", "--min-reps", "6", "--threads", "2"]
    db = str(tmp_path / "a.db")
    p = run_cli(
        ["kernels", "gemm", "--m", "64,128", "--n", "64", "--k", "64", "--db", db, "--tag", "box=a", *fast],
        cli_env,
        tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert "FLOPS" in p.stdout and "2 ok, 0 failed" in p.stdout  # TFLOPS or, on a busy host, GFLOPS
    p = run_cli(
        ["kernels", "gemm", "--m", "64,128", "--n", "64", "--k", "64", "--db", db, "--tag", "box=b", *fast],
        cli_env,
        tmp_path,
    )
    assert p.returncode == 0, p.stderr

    listed = run_cli(["results", "list", "--db", db], cli_env, tmp_path)
    assert listed.returncode == 0 and listed.stdout.count("kernels/gemm") == 4

    exported = run_cli(["results", "export", "--db", db, "--format", "json"], cli_env, tmp_path)
    records = json.loads(exported.stdout)["records"]
    assert len(records) == 4 and {r["tags"]["box"] for r in records} == {"a", "b"}
    csv_out = run_cli(["results", "export", "--db", db, "--format", "csv", "--tag", "box=a"], cli_env, tmp_path)
    lines = csv_out.stdout.splitlines()  # tidy: one row per figure, the columns a spreadsheet user looks for
    assert lines[0].startswith("run_id,started_at,system,benchmark,workload,status,valid,metric,value,unit")
    rows = list(csv.DictReader(io.StringIO(csv_out.stdout)))
    assert len(rows) > 2 and {r["benchmark"] for r in rows} == {"kernels/gemm"}
    assert (
        all(r["metric"] and r["value"] and r["unit"] for r in rows) and sum(r["primary"] == "True" for r in rows) == 2
    )
    md = run_cli(["results", "export", "--db", db, "--format", "md"], cli_env, tmp_path)
    assert md.stdout.startswith("| benchmark |") and md.stdout.count("kernels/gemm") == 4

    shown = run_cli(["results", "show", records[0]["id"][:10], "--db", db], cli_env, tmp_path)
    assert json.loads(shown.stdout)["id"] == records[0]["id"]

    cmp_ = run_cli(["compare", "tag:box=a", "tag:box=b", "--db", db, "--json"], cli_env, tmp_path)
    rows = json.loads(cmp_.stdout)["rows"]
    # real runs on a shared machine: a verdict, or not judged with the reason (contended, noisy) and its list
    assert len(rows) == 2 and all(
        r["verdict"] in ("faster", "slower", "no difference")
        or (r["verdict"].startswith("not judged: ") and (r["baseline_set_aside"] or r["candidate_set_aside"]))
        for r in rows
    )
    table = run_cli(["compare", "tag:box=a", "tag:box=b", "--db", db], cli_env, tmp_path)
    assert "geometric mean" in table.stdout

    # a run folder made "on another machine" merges into a second store, once
    run_dir = next((tmp_path / "accelbench-runs").iterdir())
    other = str(tmp_path / "b.db")
    first = run_cli(["results", "import", str(run_dir), "--db", other], cli_env, tmp_path)
    assert first.returncode == 0 and "imported 2 new" in first.stdout
    second = run_cli(["results", "import", str(run_dir), "--db", other], cli_env, tmp_path)
    assert "imported 0 new result(s), 2 already present" in second.stdout
    run_id = next(r["run_id"] for r in records if r["tags"]["box"] == "a")
    cmp_run = run_cli(["compare", run_id, "tag:box=b", "--db", db, "--json"], cli_env, tmp_path)
    assert len(json.loads(cmp_run.stdout)["rows"]) == 2
    # a record on both sides would be compared with itself: refused in one line
    same = run_cli(["compare", run_id, "tag:box=a", "--db", db], cli_env, tmp_path)
    assert same.returncode == 2 and "share 2 record(s)" in same.stderr and "Traceback" not in same.stderr


def test_compare_unknown_run_and_import_garbage(cli_env, tmp_path):
    db = str(tmp_path / "c.db")
    assert run_cli(["run", "selftest/ok", "--db", db], cli_env, tmp_path).returncode == 0
    p = run_cli(["compare", "20990101-nope", "tag:x=y", "--db", db], cli_env, tmp_path)
    assert p.returncode == 2 and "unknown run id" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"id": "x"}\n')
    p = run_cli(["results", "import", str(junk), "--db", db], cli_env, tmp_path)
    assert p.returncode == 2 and "not a valid accelbench result" in p.stderr
    p = run_cli(["results", "show", "zzz", "--db", db], cli_env, tmp_path)
    assert p.returncode == 2 and "no result" in p.stderr


def test_system_json_and_table(cli_env, tmp_path):
    p = run_cli(["system", "--json"], cli_env, tmp_path)
    prof = json.loads(p.stdout)
    assert prof["fingerprint"] and prof["cpu"]["logical_cores"] >= 1
    table = run_cli(["system"], cli_env, tmp_path)
    assert "CPU" in table.stdout and "peak TFLOPS" in table.stdout


def test_list_shows_benchmarks(cli_env, tmp_path):
    p = run_cli(["list"], cli_env, tmp_path)
    assert "kernels/gemm" in p.stdout and "selftest/crash" not in p.stdout
    assert "selftest/crash" in run_cli(["list", "--all"], cli_env, tmp_path).stdout


def test_a_device_this_machine_lacks_is_bad_input(cli_env, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    p = run_cli(["kernels", "gemm", "--device", "cuda", "--db", str(tmp_path / "d.db")], cli_env, tmp_path)
    assert p.returncode == 2 and "CUDA is not available" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_kernel_sets_sweep_and_limit(cli_env, tmp_path):
    listing = run_cli(["kernels", "--sets"], cli_env, tmp_path)
    assert listing.returncode == 0
    assert "deepbench-inference-server" in listing.stdout and "transformer" in listing.stdout
    db = str(tmp_path / "k.db")
    fast = ["--min-time", "0.02", "--min-reps", "3", "--threads", "2", "--db", db]
    p = run_cli(["kernels", "gemm", "--set", "deepbench-inference-device", "--limit", "2", *fast], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "2 ok" in p.stdout
    p = run_cli(
        ["kernels", "gemm", "--m", "16:64:x2", "--n", "16:64:x2", "--k", "16", "--sweep", *fast], cli_env, tmp_path
    )
    assert p.returncode == 0 and "3 ok" in p.stdout
    for shape in ("16x16x16", "32x32x16", "64x64x16"):
        assert shape in p.stdout


def test_a_sweep_skips_what_this_machine_cannot_run(cli_env, tmp_path):
    """Alone, tf32 on a CPU is bad input (exit 2); in a sweep it is one skipped row and the rest runs."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("tf32 runs on this machine's GPU")
    db = ["--db", str(tmp_path / "s.db")]
    args = ["train", "ncf", "--scale", "tiny", "--batch-size", "64", "--num-batches", "2", "--warmup", "0", *db]
    p = run_cli([*args, "--precision", "fp32,tf32", "--device", "cpu"], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 ok, 0 failed, 1 skipped" in p.stdout and "tf32" in p.stdout
    p = run_cli(["infer", "resnet18", "--backend", "null,int8", "--precision", "amp_fp16", *db], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 ok, 0 failed, 1 skipped" in p.stdout and "runs int8, not amp_fp16" in p.stdout


@pytest.mark.slow  # several runs end to end: in CI's second pytest step (pytest -m slow)
def test_train_scaling_table(cli_env, tmp_path):
    args = ["train", "ncf", "--scale", "tiny", "--batch-size", "64", "--nproc", "1,2", "--num-batches", "4"]
    args += ["--display-every", "2", "--warmup", "1", "--db", str(tmp_path / "t.db")]
    p = run_cli(args, cli_env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "per device" in p.stdout and "scaling over devices" in p.stdout and "efficiency" in p.stdout, p.stdout


def test_exception_text_is_shown_verbatim_never_as_markup(cli_env, tmp_path):
    """An error message with brackets is text: it neither vanishes from tables nor breaks a later command."""
    suite = tmp_path / "s.toml"
    message = "[enforce fail at alloc_cpu.cpp:127] no memory [/bold]"
    suite.write_text(f'[[benchmark]]\nname = "selftest/raise"\nparams = {{ message = "{message}" }}\n')
    db = ["--db", str(tmp_path / "m.db")]
    p = run_cli(["run", str(suite), *db], cli_env, tmp_path)
    assert p.returncode == 1 and "[enforce fail at alloc_cpu.cpp:127]" in p.stdout, p.stdout + p.stderr
    p = run_cli(["results", "list", *db], cli_env, tmp_path)
    assert p.returncode == 0 and "[/bold]" in p.stdout and "Traceback" not in p.stderr, p.stdout + p.stderr


def test_an_invalid_result_is_counted_apart_and_sets_exit_3(cli_env, tmp_path):
    """An overloaded Server run: LoadGen says INVALID, the summary and the exit status say so, the headline is
    what was served (not the scheduled rate), and the Markdown export keeps the verdict."""
    db = ["--db", str(tmp_path / "v.db")]
    args = ["infer", "resnet50", "--backend", "sleep", "--service-ms", "5", "--scenario", "server"]
    p = run_cli([*args, "--target-qps", "10000", "--duration", "1", *db], cli_env, tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "1 ok (1 INVALID), 0 failed" in p.stdout
    from accelbench.results.store import Store

    [r] = Store(tmp_path / "v.db").query()
    assert r.valid is False and r.primary_metric == "queries_per_second"  # completed, MLPerf's v6 Server figure
    assert r.primary.value < 0.5 * r.metrics["scheduled_queries_per_second"].value  # served ~1,600/s of ~10,000/s
    md = run_cli(["results", "export", "--format", "md", *db], cli_env, tmp_path)
    assert "| verdict |" in md.stdout and "| INVALID |" in md.stdout


def test_report_help_names_every_section(cli_env, tmp_path):
    """The report's sections in --help are the families' own (a search's best settings and language-model serving
    among them), so none is missing from the list."""
    from accelbench.families import families

    p = run_cli(["report", "--help"], cli_env, tmp_path)
    text = " ".join(p.stdout.split())
    assert p.returncode == 0 and "best settings" in text and "language-model serving" in text
    assert all(f.title in text for f in families() if f.report is not None)
