"""Commands that measure: ``run`` (suites) and ``kernels`` (one kernel from the command line)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rich.markup import escape

from accelbench import config, registry
from accelbench.cli import args as a
from accelbench.cli.kernel_args import add_param_flags, add_set_flags, entries_from_args
from accelbench.cli.render import (
    Checked,
    ProgressObserver,
    console,
    err_console,
    plan_table,
    results_table,
    sample_table,
    shown,
)
from accelbench.cli.render_trends import scaling_table
from accelbench.cost.match import checked, describe, measured
from accelbench.cost.price import from_options
from accelbench.devices import resolve_device
from accelbench.errors import UsageError
from accelbench.kernels.sets import all_sets
from accelbench.measure.energy import readable as domains
from accelbench.registry import BENCHMARKS, BenchmarkInfo, Command, describe_params, get, sharing_command
from accelbench.results import format as fmt
from accelbench.results.inputs import data_rows
from accelbench.results.record import Result
from accelbench.results.scaling import scaling_rows
from accelbench.results.store import Store, default_store_path
from accelbench.suite.process import warm
from accelbench.suite.suites import (
    BUILTIN,
    DEFAULT_ACCELERATOR,
    DEFAULT_CPU,
    Entry,
    Suite,
    builtin_suite,
    resolve_targets,
)

if TYPE_CHECKING:
    from accelbench.cost.price import Price
    from accelbench.suite.plan import Planned
    from accelbench.suite.runner import RunOptions, RunSummary

#: Exit statuses of a run: a failed benchmark, or (none failed) a result its own verdict calls INVALID.
EXIT_FAILED, EXIT_INVALID = 1, 3


def register(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help=f"run a suite (default: {DEFAULT_CPU} on a CPU-only machine, {DEFAULT_ACCELERATOR} with a GPU; "
        "standard is the long one)",
        description=(
            "Run benchmarks, each in its own process with a timeout; a crash, OOM or hang is recorded as "
            "failed and the suite goes on. Every record is stored the moment it is measured.\n\n"
            "Exit status: 0 all ok; 1 a benchmark failed; 3 none failed but a result is INVALID by its own "
            "verdict (LoadGen's, an accuracy gate); 2 bad input; 130 interrupted (resume with --resume).\n\n"
            f"TARGET is a built-in suite ({', '.join(BUILTIN)}), a suite file (.toml), or benchmark names "
            f"(see 'accelbench list'); several may be given. Without one: {DEFAULT_CPU} on a machine without an "
            f"accelerator, {DEFAULT_ACCELERATOR} (a few minutes of what a buyer asks first) with one; standard, "
            "every DeepBench set and model, "
            "is the long suite.\n\n"
            "--sample N runs N entries drawn across the suite's kinds (kernels, train, infer, tta...) and prints "
            "each one's estimate beside the time it took: the plan's error, measured."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help=f"suite, suite file or benchmark (default: {DEFAULT_CPU}/{DEFAULT_ACCELERATOR})",
    )
    run.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="run N entries drawn across the suite's kinds, then each one's estimate beside its time and the error",
    )
    run.add_argument(
        "--seed", type=int, metavar="S", help="with --sample, the draw's seed (default 0): same seed, same entries"
    )
    run.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run: skip what already finished")
    run.add_argument("--retry-failed", action="store_true", help="with --resume, also re-run benchmarks that failed")
    a.add_common_options(run)
    a.add_repeat_option(run)
    run.set_defaults(handler=cmd_run)

    for name in dict.fromkeys(info.command.name for info in BENCHMARKS.values() if info.command is not None):
        _register_family(sub, sharing_command(name))
    kernels = sub.add_parser(
        "kernels",
        help="kernel benchmarks (DeepBench): "
        + ", ".join(info.family.short(info.name) for info in BENCHMARKS.values() if info.family.grouped),
        description=(
            "Time one kernel from the command line, on one shape, a sweep (size and option flags take "
            "comma lists or ranges such as 256:4096:x2) or a named shape set (--set). 'accelbench kernels "
            "--sets' lists the sets."
        ),
    )
    kernels.add_argument("--sets", action="store_true", help="list the named shape sets and their sizes")
    kernels.set_defaults(handler=cmd_kernel_sets, help_parser=kernels)
    ksub = kernels.add_subparsers(dest="kernel", metavar="KERNEL", parser_class=a.Parser)

    for info in BENCHMARKS.values():
        if not info.family.grouped:  # the kernels: one subcommand of 'accelbench kernels' each
            continue
        short = info.family.short(info.name)
        doc = (info.params.__doc__ or "").strip()
        kp = ksub.add_parser(short, help=info.description.replace("%", "%%"), description=f"{info.description}. {doc}")
        add_param_flags(kp, info.params, short)
        add_set_flags(kp, info.name)
        a.add_common_options(kp)
        a.add_repeat_option(kp)
        kp.set_defaults(handler=cmd_kernel, benchmark=info.name)


def _register_family(sub: Any, infos: list[BenchmarkInfo]) -> None:
    """``accelbench train|infer|tta ...``: the positional field, one flag per other field of each benchmark the
    command offers (the first's, then the others' own in groups named by what they measure), the common options."""
    from dataclasses import fields

    first = infos[0]
    cmd = first.offered_as
    field = next(f for f in fields(first.params) if f.name == cmd.positional)
    description = " ".join([cmd.description, *(o.offered_as.description for o in infos[1:])])
    p = sub.add_parser(cmd.name, help=cmd.help.replace("%", "%%"), description=description)
    p.add_argument(
        cmd.positional,
        type=a.list_of(str),
        metavar=cmd.metavar,
        help=f"{field.metadata['help']}; a comma list sweeps",
    )
    taken = {cmd.positional}
    choices: dict[str, tuple[str, ...]] = {}  # a shared field's choices: every benchmark's (--scenario interactive)
    for info in infos:
        for f, _ in info.params.flags():
            choices[f.name] = tuple(dict.fromkeys([*choices.get(f.name, ()), *(f.metadata.get("choices") or ())]))
    more: dict[str, str] = {}  # a shared field's meaning to the other benchmarks, where it differs
    for info in infos[1:]:
        for f, _ in info.params.flags():
            first_help = next((g.metadata.get("help") for g, _ in first.params.flags() if g.name == f.name), None)
            if first_help is not None and f.metadata.get("help") != first_help:
                more[f.name] = more.get(f.name, "") + f"; {info.measures}: {f.metadata.get('help')}"
    for info in infos:
        title = info.measures or cmd.name
        add_param_flags(p, info.params, title, skip=frozenset(taken), choices=choices, more_help=more)
        taken |= {f.name for f, _ in info.params.flags()}
    a.add_common_options(p)
    a.add_repeat_option(p)
    p.set_defaults(handler=cmd_family, benchmark=first.name)


def _options(ns: argparse.Namespace) -> RunOptions:
    from accelbench.suite.runner import RunOptions

    return RunOptions(
        device=ns.device,
        threads=ns.threads,
        tags=dict(ns.tag),
        timeout=ns.timeout,
        out_dir=ns.out,
        retry_failed=getattr(ns, "retry_failed", False),
        command=shlex.join(["accelbench", *sys.argv[1:]]),
        price=_price(ns),
    )


def _price(ns: argparse.Namespace) -> Price | None:
    """The run's price, checked against the hardware it measures, and said once where a file or a drop hides it.

    A named instance whose accelerators differ from the measured device is refused (``--price-mismatch-ok``
    keeps it, labelled); a price from ``config.toml`` is printed with its source, since nothing on the
    command line shows it; an electricity price that no counter and no ``--board-watts`` can apply is said.
    """
    price = from_options(
        price_per_hour=ns.price_per_hour,
        instance_name=ns.instance,
        purchase_price=ns.purchase_price,
        amortize_years=ns.amortize_years,
        power_cost_kwh=ns.power_cost_kwh,
        board_watts=ns.board_watts,
        config=config.load(),
        config_where=str(config.config_path()),
    )
    if getattr(ns, "price_mismatch_ok", False) and (price is None or not price.instance):
        raise UsageError("--price-mismatch-ok applies to an instance's price (--instance, or config.toml's instance)")
    if price is None:
        return None
    run = measured(ns.device) if price.instance or price.electricity_dropped else None
    if price.instance and run is not None:
        price = checked(price, run, ok=getattr(ns, "price_mismatch_ok", False))
    readable: list[str] = []
    if price.electricity_dropped and run is not None:
        found = domains(gpus=range(len(run.accelerators)))
        readable = [name for name, state in found.items() if state.startswith("readable")]
    if not getattr(ns, "dry_run", False):
        for line in describe(price, readable):
            (err_console if getattr(ns, "json", False) else console).print(f"[yellow]{escape(line)}[/]")
    return price


def _execute(
    ns: argparse.Namespace,
    suite: Suite | None,
    resume: str | None = None,
    after: Callable[[RunSummary], None] | None = None,
    note: str = "",
) -> int:
    """Open the store (failing before anything runs), run with progress, print the summary."""
    from accelbench.suite.runner import run_suite
    from accelbench.system.profile import collect_profile

    options = _options(ns)  # a bad price is bad input: said before anything is opened or measured
    if suite is not None and not ns.dry_run:
        _refuse_what_its_timeout_kills(suite, ns.timeout)
    if note and not ns.dry_run:  # stdout is the JSON's alone with --json
        (err_console if ns.json else console).print(f"[dim]{note}[/]")
    if ns.dry_run:  # reads the store's last times where there is one; writes nothing, creates nothing
        path = Path(ns.db).expanduser() if ns.db else default_store_path()
        store = Store(path, readonly=True) if path.is_file() else None
    else:
        store = Store(ns.db)
    if not ns.dry_run:
        warm()  # the worker server imports torch while the profile is collected
    profile = collect_profile()
    if ns.device is not None:
        resolve_device(ns.device)  # a device this machine lacks is bad input, not a failed benchmark
    if suite is None and resume is None:
        suite = builtin_suite(DEFAULT_ACCELERATOR if profile["accelerators"] else DEFAULT_CPU)
    if suite is not None:  # the entries for what it runs on: --device's kind, else an accelerator where there is one
        on_cpu = ns.device == "cpu" or (ns.device in (None, "auto") and not profile["accelerators"])
        suite = suite.on("cpu" if on_cpu else "accelerator")
        if getattr(ns, "sample", None) is not None:  # drawn from what runs here, before any repeat
            suite = sampled(suite, ns.sample, ns.seed or 0)
        suite = suite.repeated(ns.repeat)
    planned = _plan(ns, suite, store, profile["fingerprint"])
    if planned is None or store is None:  # --dry-run (the one run with no store open): the plan printed, no run
        return 0
    estimates = {p.entry.key: p.last_seconds for p in planned}
    with ProgressObserver(estimates, quiet=ns.json) as observer:
        summary = run_suite(suite or Suite("resume", []), store, options, observer, resume=resume, profile=profile)
    checked = _checked(planned, observer.finished) if getattr(ns, "sample", None) is not None else []
    counts = {s: sum(r.status == s for r in summary.results) for s in ("ok", "failed", "skipped")}
    if ns.json:
        out = summary_dict(summary, store.path, counts)
        if checked:
            out["sample"] = [_checked_dict(c) for c in checked]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    elif summary.results:
        console.print(results_table(summary.results, title=f"run {summary.run_id}"))
        if after is not None:
            after(summary)
    if checked and not ns.json:
        console.print(sample_table(checked))
    invalid = sum(r.status == "ok" and r.valid is False for r in summary.results)
    ok = f"{counts['ok']} ok" + (f" ([red]{invalid} INVALID[/])" if invalid else "")
    (err_console if ns.json else console).print(
        f"{len(summary.results)} result(s): {ok}, {counts['failed']} failed, {counts['skipped']} skipped; "
        f"stored in {escape(str(store.path))}; run folder {escape(shown(summary.run_dir))}"
    )
    if summary.interrupted:
        (err_console if ns.json else console).print(
            "[yellow]interrupted[/]: finished results are kept; continue with: "
            f"accelbench run --resume {summary.run_id}"
        )
        return 130
    if counts["failed"]:
        return EXIT_FAILED
    return EXIT_INVALID if invalid else 0


def _refuse_what_its_timeout_kills(suite: Suite, timeout: float | None) -> None:
    """An entry whose own parameters ask for more time than its timeout (``--duration 100000``) is bad input,
    refused in one line before anything starts: it used to be warned about, then killed after 30 minutes.
    (``--dry-run`` still lists it, with the plan's warning.)"""
    from accelbench.suite.plan import timeout_of

    for entry in suite.entries:
        floor = registry.get(entry.benchmark).make_params(entry.params).planned_seconds()
        limit = timeout_of(entry, timeout)
        if floor is not None and floor >= limit:
            raise UsageError(
                f"{entry.label} asks for at least {floor:g} s (--duration), not less than its {limit:g} s timeout, "
                "so it would be killed before it ends: lower --duration or raise --timeout"
            )


def sampled(suite: Suite, n: int, seed: int) -> Suite:
    """``n`` entries of ``suite`` drawn across its kinds (the family before the ``/``: kernels, train, infer,
    tta...), the same for the same seed: each kind's entries shuffled by the seed, then one of each kind in turn
    (the kinds in an order the seed shuffles too) until ``n``; run in the suite's order. A sample of a suite's
    many kernels alone would check the model of one family only; a kind drawn in turn puts every kind in a sample
    of as many."""
    import random

    entries = suite.entries
    if n < 1 or n > len(entries):
        raise UsageError(f"--sample takes 1 to {len(entries)} (the entries of {suite.name} that run here), not {n}")
    rng = random.Random(seed)
    kinds: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        kinds.setdefault(e.benchmark.split("/")[0], []).append(i)
    for indices in kinds.values():
        rng.shuffle(indices)
    order = list(kinds.values())
    rng.shuffle(order)  # a sample smaller than the kinds leaves out different kinds for different seeds
    chosen: list[int] = []
    while len(chosen) < n:
        for indices in order:
            if indices and len(chosen) < n:
                chosen.append(indices.pop())
    picked = [entries[i] for i in sorted(chosen)]
    meta = dict(suite.meta, sample=n, seed=seed)
    return Suite(suite.name, picked, suite.description, suite.source, meta)


def _checked(planned: list[Planned], finished: list[tuple[Entry, float]]) -> list[Checked]:
    """Each finished entry's plan estimate beside the wall time it took (in the order they ran)."""
    by_key = {p.entry.key: p.estimate for p in planned}
    return [Checked(e, estimate, s) for e, s in finished if (estimate := by_key.get(e.key)) is not None]


def _checked_dict(c: Checked) -> dict[str, Any]:
    return {"label": c.entry.label, "estimate": c.estimate.to_dict(), "seconds": c.seconds, "error_pct": c.error_pct}


def _plan(ns: argparse.Namespace, suite: Suite | None, store: Store | None, fingerprint: str) -> list[Planned] | None:
    """Warn about what cannot finish in its timeout; with --dry-run print the plan and return None."""
    from accelbench.suite.estimate import Target
    from accelbench.suite.plan import plan

    if suite is None:  # a resume: its plan is the stored suite's, already partly done
        if ns.dry_run:
            raise UsageError("--dry-run lists a new run; it does not apply to --resume")
        return []
    planned = plan(suite, store, fingerprint, ns.timeout, Target.of(ns.device))
    left = suite.meta.get("left_out")
    other = "an accelerator" if suite.meta.get("target") == "cpu" else "a CPU"
    note = f"{left} entries of {suite.name} are for runs on {other}: left out of this one" if left else ""
    if ns.dry_run:
        if ns.json:
            sys.stdout.write(json.dumps([p.to_dict() for p in planned], indent=2) + "\n")
        else:
            console.print(plan_table(planned))
            if note:
                console.print(note)
        return None
    if note and not ns.json:
        console.print(note)
    for p in planned:
        if p.warning:
            err_console.print(f"[yellow]warning[/]: {escape(p.entry.label)} {escape(p.warning)}")
    if suite.meta.get("sample") and not ns.json:
        console.print(
            f"a sample of {len(suite.entries)} entries of {suite.name} (seed {suite.meta['seed']}), drawn across its "
            "kinds; each estimate is set beside its time at the end"
        )
    return planned


def summary_dict(summary: RunSummary, store_path: Path | str, counts: dict[str, int]) -> dict[str, Any]:
    """A run for scripts: where it is, what it counted, every record in full."""
    return {
        "run_id": summary.run_id,
        "run_dir": str(Path(summary.run_dir).resolve()),
        "store": str(store_path),
        "interrupted": summary.interrupted,
        "counts": counts,
        "results": [r.to_dict() for r in summary.results],
    }


def _check_environment(suite: Suite, device: str | None) -> None:
    """What the machine cannot do at all (a missing GPU, too many processes) is bad input: fail before running.

    In a sweep, the combinations it cannot run are recorded as skipped by the benchmark itself (as a
    suite file's are); only a command line that asks for nothing runnable is refused.
    """
    problems = []
    for entry in suite.entries:
        params = registry.get(entry.benchmark).make_params(entry.params)
        try:
            params.check_environment(resolve_device(device or params.device).type)
        except UsageError as exc:
            problems.append(exc)
    if problems and len(problems) == len(suite.entries):
        raise problems[0]


def cmd_run(ns: argparse.Namespace) -> int:
    if ns.retry_failed and not ns.resume:
        raise UsageError("--retry-failed only applies with --resume RUN_ID")
    if ns.seed is not None and ns.sample is None:
        raise UsageError("--seed applies to --sample N")
    if ns.sample is not None and ns.resume:
        raise UsageError("--sample draws a new run; a resumed run keeps its entries")
    if ns.resume:
        if ns.targets:
            raise UsageError("give either targets or --resume RUN_ID, not both")
        if ns.repeat > 1:
            raise UsageError("--repeat applies to a new run; a resumed run keeps the repeats it was started with")
        return _execute(ns, None, resume=ns.resume)
    suite = resolve_targets(ns.targets) if ns.targets else None
    return _execute(ns, suite)


def cmd_kernel(ns: argparse.Namespace) -> int:
    entries = entries_from_args(ns, ns.benchmark, get(ns.benchmark).params)
    suite = Suite(ns.benchmark, entries, source="command line")
    _check_environment(suite, ns.device)
    return _execute(ns, suite)


def cmd_family(ns: argparse.Namespace) -> int:
    info = registry.get(ns.benchmark)
    command = info.offered_as
    ns.sweep = False  # the positional is a list: it sweeps like any other flag
    entries = []
    for name, values in _routed(ns, info).items():
        chosen = registry.get(name)
        for given, field, value in chosen.offered_as.implies:  # a data directory given means real data, not ignored
            if getattr(ns, given, None) and getattr(ns, field, None) is None:
                setattr(ns, field, value)
        entries += _family_entries(ns, chosen, values)
    suite = Suite(command.name, entries, source="command line")
    _check_environment(suite, ns.device)
    return _execute(ns, suite, after=lambda summary: _print_scaling(summary, command), note=command.note)


def _routed(ns: argparse.Namespace, info: BenchmarkInfo) -> dict[str, list[str]]:
    """The positional's values (models) by the benchmark that measures each (:func:`accelbench.registry.route`)."""
    positional = info.offered_as.positional
    out: dict[str, list[str]] = {}
    for value in getattr(ns, positional):
        out.setdefault(registry.route(info.name, {positional: value}), []).append(value)
    return out


def _family_entries(ns: argparse.Namespace, info: BenchmarkInfo, values: list[str]) -> list[Entry]:
    """The entries of ``info`` for its share of the positional's values; a flag given that only another benchmark
    of the command takes is refused, naming what it applies to (never silently dropped)."""

    positional = info.offered_as.positional
    own = {f.name for f, _ in info.params.flags()}
    for other in registry.sharing_command(info.offered_as.name):
        for f, _ in other.params.flags():
            if f.name not in own and getattr(ns, f.name, None) is not None:
                flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
                what = other.measures or other.name
                raise UsageError(f"{flag} applies to {what} (accelbench list --models), not {', '.join(values)}")
    local = argparse.Namespace(**{**vars(ns), positional: values})
    return entries_from_args(local, info.name, info.params)


def _print_scaling(summary: RunSummary, cmd: Command) -> None:
    if cmd.data_table:
        _print_data(summary.results)
    if cmd.scaling is None:
        return
    rows = scaling_rows(summary.results, metric=cmd.scaling, describe=describe_params)
    if rows:
        console.print(scaling_table(rows, figure=cmd.scaling_figure))


def _print_data(results: list[Result]) -> None:
    """The TPUv2 vs V100 study's comparison: synthetic, real, their ratio and the input-bound share, per device
    count."""
    from rich.table import Table


    rows = data_rows(results, describe=describe_params)
    if not rows:
        return
    table = Table(title="synthetic against real data (the input pipeline's cost)", title_justify="left")
    for col in ("workload", "devices", "synthetic", "real", "real / synthetic", "input-bound", "workers"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for r in rows:
        share = f"{r.wait_share.value:.1f}% of each step" if r.wait_share else "-"
        table.add_row(
            escape(r.workload),
            str(r.devices),
            f"{fmt.metric(r.synthetic)} {fmt.ci_percent(r.synthetic)}",
            f"{fmt.metric(r.real)} {fmt.ci_percent(r.real)}",
            f"{r.ratio:.2f}x",
            share,
            str(r.workers),
        )
    console.print(table)


def cmd_kernel_sets(ns: argparse.Namespace) -> int:
    if not ns.sets:
        ns.help_parser.print_help()
        return 0
    from rich.table import Table

    table = Table()
    for col in ("kernel", "set", "shapes"):
        table.add_column(col)
    for s in all_sets():
        table.add_row(s.benchmark.split("/", 1)[1], s.name, str(len(s.rows)))
    console.print(table)
    return 0
