"""Commands that measure: ``run`` (suites) and ``kernels`` (one kernel from the command line)."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from accelbench.cli import args as a
from accelbench.errors import UsageError
from accelbench.registry import describe_params
from accelbench.suite.suites import BUILTIN, Suite


def register(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run a suite (default: quick on a CPU-only machine, standard with a GPU)",
        description=(
            "Run benchmarks, each in its own process with a timeout; a crash, OOM or hang is recorded as "
            "failed and the suite goes on. Every record is stored the moment it is measured.\n\n"
            f"TARGET is a built-in suite ({', '.join(BUILTIN)}), a suite file (.toml), or benchmark names "
            "(see 'accelbench list'); several may be given."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "targets", nargs="*", metavar="TARGET", help="suite, suite file or benchmark (default: quick/standard)"
    )
    run.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run: skip what already finished")
    run.add_argument("--retry-failed", action="store_true", help="with --resume, also re-run benchmarks that failed")
    a.add_common_options(run)
    run.set_defaults(handler=cmd_run)

    _register_train(sub)
    _register_infer(sub)
    _register_tta(sub)
    kernels = sub.add_parser(
        "kernels",
        help="kernel benchmarks (DeepBench): gemm, conv, rnn, attention, sparse, membw, allreduce",
        description=(
            "Time one kernel from the command line, on one shape, a sweep (size and option flags take "
            "comma lists or ranges such as 256:4096:x2) or a named shape set (--set). 'accelbench kernels "
            "--sets' lists the sets."
        ),
    )
    kernels.add_argument("--sets", action="store_true", help="list the named shape sets and their sizes")
    kernels.set_defaults(handler=cmd_kernel_sets, help_parser=kernels)
    ksub = kernels.add_subparsers(dest="kernel", metavar="KERNEL", parser_class=a.Parser)
    from accelbench.cli.kernel_args import add_param_flags, add_set_flags
    from accelbench.registry import BENCHMARKS

    for info in BENCHMARKS.values():
        if not info.name.startswith("kernels/"):
            continue
        short = info.name.split("/", 1)[1]
        doc = (info.params.__doc__ or "").strip()
        kp = ksub.add_parser(short, help=info.description.replace("%", "%%"), description=f"{info.description}. {doc}")
        add_param_flags(kp, info.params, short)
        add_set_flags(kp, info.name)
        _add_timing_options(kp)
        a.add_common_options(kp)
        kp.set_defaults(handler=cmd_kernel, benchmark=info.name)


def _register_train(sub: Any) -> None:
    from accelbench.cli.kernel_args import add_param_flags
    from accelbench.train.specs import TrainParams

    train = sub.add_parser(
        "train",
        help="training throughput (samples/s) of a model on synthetic data, as tf_cnn_benchmarks measured it",
        description=(
            "Train MODEL on synthetic batches generated on the device: --warmup steps, then --num-batches "
            "measured steps in windows of --display-every. Reports samples/s (median over windows, with a "
            "95% CI), seconds per step, peak memory, and TFLOPS and % of peak from the model's counted FLOPs. "
            "--batch-size is PER DEVICE. Size and option flags take comma lists to sweep (--batch-size 32,64,128)."
        ),
    )
    train.add_argument(
        "model",
        type=a.list_of(str),
        metavar="MODEL",
        help="model name (see 'accelbench list --models'), a comma list, or package.module:Class for your own",
    )
    add_param_flags(train, TrainParams, "training", skip=frozenset({"model"}))
    a.add_common_options(train)
    train.set_defaults(handler=cmd_train)


def _register_infer(sub: Any) -> None:
    from accelbench.cli.kernel_args import add_param_flags
    from accelbench.infer.specs import InferParams

    infer = sub.add_parser(
        "infer",
        help="inference under the real MLPerf LoadGen: offline, server, singlestream, multistream",
        description=(
            "Serve MODEL to the MLPerf LoadGen (mlcommons-loadgen) in a scenario, through a batching system "
            "under test (one worker per device, a shared queue, --batch-size and --max-wait-ms). A short probe "
            "sets LoadGen's hints first. --mode performance records the scenario's metric (Offline samples/s, "
            "Server QPS, SingleStream p90 latency, MultiStream p99 latency), latency percentiles and LoadGen's "
            "VALID/INVALID verdict with the reasons in plain words, read from mlperf_log_detail.txt. --mode "
            "accuracy scores the answers LoadGen logged (mlperf_log_accuracy.json) against an FP32 eager run "
            "of the same weights on the same samples (with --dataset DIR: against its labels) and applies "
            "MLPerf's 99%/99.9% gates. --mode find-peak bisects the highest valid Server QPS (2%) or the "
            "largest MultiStream query within --latency-bound-ms, then confirms it with a full run. Backends: "
            "torch, compile, onnxruntime and int8 (pip install 'accelbench[onnx]'), null and sleep (harness "
            "checks), or a user's package.module:Class. The quick profile takes seconds and is non-compliant; "
            "official loads LoadGen's mlperf.conf (600 s, official seeds)."
        ),
    )
    infer.add_argument("model", type=a.list_of(str), metavar="MODEL", help="model name, or a comma list")
    add_param_flags(infer, InferParams, "inference", skip=frozenset({"model"}))
    a.add_common_options(infer)
    infer.set_defaults(handler=cmd_infer)


def _add_timing_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("measurement")
    g.add_argument(
        "--min-time", type=float, default=0.5, metavar="S", help="keep sampling for at least S seconds (default 0.5)"
    )
    g.add_argument(
        "--max-time", type=float, default=10.0, metavar="S", help="stop sampling after S seconds (default 10)"
    )
    g.add_argument("--min-reps", type=a.positive_int, default=10, metavar="N", help="at least N samples (default 10)")
    g.add_argument(
        "--warmup", type=float, default=0.1, metavar="S", help="warm-up seconds before sampling (default 0.1)"
    )
    g.add_argument(
        "--cache",
        choices=("auto", "hot", "cold"),
        default="auto",
        help="cold flushes the GPU's L2 between samples (auto: cold on CUDA, hot on CPU)",
    )
    g.add_argument("--no-check", dest="check", action="store_false", help="skip the check against the fp64 reference")
    g.add_argument("--graph", action="store_true", help="also time CUDA graph replay, beside eager (CUDA only)")


def _options(ns: argparse.Namespace) -> Any:
    from accelbench.suite.runner import RunOptions

    return RunOptions(
        device=ns.device,
        threads=ns.threads,
        tags=dict(ns.tag),
        timeout=ns.timeout,
        out_dir=ns.out,
        retry_failed=getattr(ns, "retry_failed", False),
        command=shlex.join(["accelbench", *sys.argv[1:]]),
    )


def _execute(ns: argparse.Namespace, suite: Suite | None, resume: str | None = None, after: Any = None) -> int:
    """Open the store (failing before anything runs), run with progress, print the summary."""
    from accelbench.cli.render import ProgressObserver, console, results_table
    from accelbench.results.store import Store
    from accelbench.suite.runner import run_suite
    from accelbench.system.profile import collect_profile

    store = Store(ns.db)
    profile = collect_profile()
    if ns.device is not None:
        from accelbench.devices import resolve_device

        resolve_device(ns.device)  # a device this machine lacks is bad input, not a failed benchmark
    if suite is None and resume is None:
        from accelbench.suite.suites import builtin_suite

        suite = builtin_suite("standard" if profile["accelerators"] else "quick")
    with ProgressObserver() as observer:
        summary = run_suite(suite or Suite("resume", []), store, _options(ns), observer, resume=resume, profile=profile)
    if summary.results:
        console.print(results_table(summary.results, title=f"run {summary.run_id}"))
        if after is not None:
            after(summary)
    counts = {s: sum(r.status == s for r in summary.results) for s in ("ok", "failed", "skipped")}
    console.print(
        f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped; "
        f"stored in {store.path}; run folder {summary.run_dir}"
    )
    if summary.interrupted:
        console.print(
            "[yellow]interrupted[/]: finished results are kept; continue with: "
            f"accelbench run --resume {summary.run_id}"
        )
        return 130
    return 1 if counts["failed"] else 0


def _check_environment(suite: Suite, device: str | None) -> None:
    """What the machine cannot do (a missing GPU, too many processes) is bad input: fail before running."""
    from accelbench import registry
    from accelbench.devices import resolve_device

    for entry in suite.entries:
        params = registry.get(entry.benchmark).make_params(entry.params)
        params.check_environment(resolve_device(device or params.device).type)


def cmd_run(ns: argparse.Namespace) -> int:
    from accelbench.suite.suites import resolve_targets

    if ns.retry_failed and not ns.resume:
        raise UsageError("--retry-failed only applies with --resume RUN_ID")
    if ns.resume:
        if ns.targets:
            raise UsageError("give either targets or --resume RUN_ID, not both")
        return _execute(ns, None, resume=ns.resume)
    suite = resolve_targets(ns.targets) if ns.targets else None
    return _execute(ns, suite)


def cmd_kernel(ns: argparse.Namespace) -> int:
    from accelbench.cli.kernel_args import entries_from_args
    from accelbench.registry import get

    entries = entries_from_args(ns, ns.benchmark, get(ns.benchmark).params)
    suite = Suite(ns.benchmark, entries, source="command line")
    _check_environment(suite, ns.device)
    return _execute(ns, suite)


def cmd_train(ns: argparse.Namespace) -> int:
    from accelbench.cli.kernel_args import entries_from_args
    from accelbench.cli.render import console
    from accelbench.train.specs import TrainParams

    ns.sweep = False  # ns.model is a list: models sweep like any other flag
    entries = entries_from_args(ns, "train/throughput", TrainParams)
    suite = Suite("train", entries, source="command line")
    _check_environment(suite, ns.device)
    console.print(
        "[dim]batch sizes are per device: the global batch is the per-device batch x the number of devices[/]"
    )
    return _execute(ns, suite, after=_print_scaling)


def _print_scaling(summary: Any) -> None:
    from accelbench.cli.render import console, scaling_table
    from accelbench.results.scaling import scaling_rows

    rows = scaling_rows(summary.results, describe=describe_params)
    if rows:
        console.print(scaling_table(rows))


def cmd_infer(ns: argparse.Namespace) -> int:
    from accelbench.cli.kernel_args import entries_from_args
    from accelbench.infer.specs import InferParams

    ns.sweep = False  # ns.model is a list
    suite = Suite("infer", entries_from_args(ns, "infer/loadgen", InferParams), source="command line")
    _check_environment(suite, ns.device)
    return _execute(ns, suite)


def _register_tta(sub: Any) -> None:
    from accelbench.cli.kernel_args import add_param_flags
    from accelbench.tta.recipes import RECIPES
    from accelbench.tta.specs import TtaParams

    tta = sub.add_parser(
        "tta",
        help="time (and cost) to accuracy on real data over several seeds: MLPerf Training, DAWNBench",
        description=(
            "Train WORKLOAD on its real dataset until the quality target, --seeds times, each seed with its "
            "own MLPerf-format log (mlperf-logging) in the run folder. The clock starts after model creation "
            "and data staging (MLPerf's run_start) and stops at the first evaluation that reaches the target. "
            "The score is the olympic mean (the fastest and the slowest runs dropped); a run that hits "
            "--max-epochs counts as the slowest, and more than one such run makes the result invalid. With a "
            "price per hour (--price-per-hour, or price_per_hour in config.toml) the cost to accuracy is "
            f"recorded too. Workloads: {', '.join(RECIPES)}; digits needs no download (scikit-learn ships it)."
        ),
    )
    tta.add_argument("workload", type=a.list_of(str), metavar="WORKLOAD", help="workload name, or a comma list")
    add_param_flags(tta, TtaParams, "tta", skip=frozenset({"workload"}))
    a.add_common_options(tta)
    tta.set_defaults(handler=cmd_tta)


def cmd_tta(ns: argparse.Namespace) -> int:
    from accelbench.cli.kernel_args import entries_from_args
    from accelbench.tta.specs import TtaParams

    ns.sweep = False
    suite = Suite("tta", entries_from_args(ns, "tta/time_to_target", TtaParams), source="command line")
    _check_environment(suite, ns.device)
    return _execute(ns, suite, after=_print_tta_scaling)


def _print_tta_scaling(summary: Any) -> None:
    from accelbench.cli.render import console, scaling_table
    from accelbench.results.scaling import scaling_rows

    rows = scaling_rows(summary.results, metric="time_to_target_seconds", describe=describe_params)
    if rows:
        console.print(scaling_table(rows, figure="time to target"))


def cmd_kernel_sets(ns: argparse.Namespace) -> int:
    if not ns.sets:
        ns.help_parser.print_help()
        return 0
    from rich.table import Table

    from accelbench.cli.render import console
    from accelbench.kernels.sets import all_sets

    table = Table()
    for col in ("kernel", "set", "shapes"):
        table.add_column(col)
    for s in all_sets():
        table.add_row(s.benchmark.split("/", 1)[1], s.name, str(len(s.rows)))
    console.print(table)
    return 0
