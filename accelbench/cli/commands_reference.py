"""``reference``: the published results and cloud prices shipped with the package, and this machine beside them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.markup import escape
from rich.table import Table

from accelbench.errors import UsageError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "reference",
        help="published results (with their sources) and dated cloud prices to hold this machine against",
        description=(
            "List the published results shipped with accelbench: the seed articles' tables (tf_cnn_benchmarks on "
            "Quadro RTX 8000, TPUv2 vs V100 with prices, MLPerf v0.5 V100-PCIe/T4 ratios, DAWNBench) and Lambda's "
            "PyTorch training throughput (RTX 8000 to H100, 1-8 GPUs), each with the place it was read from and "
            "the fields that decide comparability. 'accelbench compare RUN --reference' puts a run beside them.\n\n"
            "--prices lists the dated cloud instance prices that --instance NAME can name (never used unless named)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", help="only this model (accelbench's name: resnet50, bert, ssd, ...)")
    p.add_argument(
        "--accelerator", help="only accelerators whose name has every word of this (e.g. 'h100', 'rtx 8000')"
    )
    p.add_argument("--task", choices=("train_throughput", "time_to_accuracy"), help="only this task")
    p.add_argument("--prices", action="store_true", help="list the cloud instance price table instead")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(handler=cmd_reference)


def cmd_reference(ns: argparse.Namespace) -> int:
    from accelbench.cli.render import console
    from accelbench.reference.table import select
    from accelbench.results import format as fmt

    if ns.prices:
        return _prices(ns)
    rows = select(model=ns.model, accelerator=ns.accelerator, task=ns.task)
    if not rows:
        raise UsageError("no published result matches; 'accelbench reference' lists them all")
    if ns.json:
        sys.stdout.write(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
        return 0
    table = Table(caption="sources: " + "; ".join(sorted({r.source_ref for r in rows})), caption_justify="left")
    priced = any(r.per_usd_hour for r in rows)
    for col, kw in (
        ("model", {"no_wrap": True}),
        ("published", {}),
        ("setup", {}),
        ("figure", {"justify": "right"}),
        *((("per $/h", {"justify": "right"}),) if priced else ()),
        ("source", {}),
    ):
        table.add_column(col, overflow="fold", **kw)
    for r in rows:
        setup = ", ".join(
            x
            for x in (r.framework, r.precision, f"batch {r.batch_per_device}" if r.batch_per_device else "", r.data)
            if x
        )
        per = [f"{fmt.number(r.per_usd_hour)} at ${r.price_usd_per_hour:g}/h" if r.per_usd_hour else ""]
        table.add_row(
            r.model,
            escape(f"{r.accelerator} x{r.count}"),
            escape(setup),
            escape(r.figure),
            *(per if priced else []),
            escape(r.source),
        )
    console.print(table)
    return 0


def _prices(ns: argparse.Namespace) -> int:
    from accelbench.cli.render import console
    from accelbench.cost.price import instances

    rows = instances()
    if ns.accelerator:
        from accelbench.reference.table import accelerator_matches

        rows = tuple(i for i in rows if accelerator_matches(ns.accelerator, i.accelerator))
    if ns.json:
        sys.stdout.write(json.dumps([i.__dict__ for i in rows], indent=2) + "\n")
        return 0
    table = Table(
        caption="list prices as read on the date shown, from the source shown: check today's before relying on one; "
        "used only when named (--instance NAME)",
        caption_justify="left",
    )
    for col, kw in (
        ("instance", {"no_wrap": True}),
        ("provider", {}),
        ("region", {}),
        ("accelerators", {}),
        ("USD/h", {"justify": "right"}),
        ("per device", {"justify": "right"}),
        ("read on", {"no_wrap": True}),
        ("source", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    for i in rows:
        table.add_row(
            i.name,
            i.provider,
            i.region,
            f"{i.count}x {escape(i.accelerator)}",
            f"{i.usd_per_hour:,.2f}",
            f"{i.usd_per_hour / i.count:,.2f}",
            i.read_on,
            escape(i.source),
        )
    console.print(table)
    return 0


def print_beside_references(results: list[Any], selector: str, as_json: bool) -> int:
    """``compare RUN --reference``: each result of the run beside the published rows of its task and model."""
    from accelbench.cli.render import console
    from accelbench.reference.match import matches
    from accelbench.registry import describe_params
    from accelbench.results import format as fmt

    found = [m for r in results for m in matches(r)]
    if as_json:
        sys.stdout.write(json.dumps([m.to_dict() for m in found], indent=2) + "\n")
        return 0
    if not found:
        raise UsageError(
            f"no result of {selector} has a published counterpart (training throughput or time to accuracy of a "
            "model in 'accelbench reference')"
        )
    for rid in dict.fromkeys(m.result.id for m in found):
        # the closest setups first: the fewer differences, the more the ratio says about the machines
        ms = sorted((m for m in found if m.result.id == rid), key=lambda m: len(m.differences))
        r = ms[0].result
        primary = r.metrics.get("throughput") or r.primary
        price = r.system.get("price") or {}
        title = f"{r.benchmark} {describe_params(r.benchmark, r.params)}: {fmt.outcome(r)}"
        if price:
            title += f" at ${price['usd_per_hour']:,.4g}/h ({price.get('source', '')})"
        table = Table(title=escape(title), title_justify="left", caption_justify="left")
        priced = any(m.reference_per_usd_hour is not None for m in ms)
        for col, kw in (
            ("published", {}),
            ("figure", {"justify": "right"}),
            ("this / published", {"justify": "right"}),
            ("per device", {"justify": "right"}),
            *((("per $/h: this vs published", {"justify": "right"}),) if priced else ()),
            ("what differs", {}),
        ):
            table.add_column(col, overflow="fold", **kw)
        for m in ms:
            ref = m.reference
            table.add_row(
                escape(f"{ref.accelerator} x{ref.count} ({ref.source})"),
                escape(ref.figure),
                f"{m.ratio:.3g}x",
                f"{m.ratio_per_device:.3g}x" if m.ratio_per_device is not None else "",
                *([m.per_dollar] if priced else []),
                escape(m.comparable),
            )
        unit = primary.unit if primary is not None else ""
        table.caption = (
            f"ratios: this run's {unit} over the published figure (above 1: this machine is faster); "
            "sources: " + "; ".join(sorted({m.reference.source_ref for m in ms}))
        )
        console.print(table)
    return 0


def print_published_ratios(baseline: list[Any], candidate: list[Any]) -> None:
    """Below a comparison of two of the user's systems: what was published for the same pair of accelerators."""
    from accelbench.cli.render import console
    from accelbench.reference.match import ratio_rows

    def accelerator(records: list[Any]) -> str | None:
        for r in records:
            accs = (r.system.get("profile") or {}).get("accelerators") or []
            if accs:
                return str(accs[0].get("name", ""))
        return None

    a, b = accelerator(baseline), accelerator(candidate)
    if not a or not b:
        return
    rows = ratio_rows((a, b))
    if not rows:
        return
    table = Table(title=f"published for {escape(a)} and {escape(b)}", title_justify="left", caption_justify="left")
    for col in ("model", "figure", "ratio", "source"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.model, r.metric, escape(f"{r.value:.3g} {r.unit}"), escape(f"{r.source_ref}; {r.notes}"))
    console.print(table)
