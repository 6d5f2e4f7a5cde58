"""``reference``: the published results and cloud prices shipped with the package, and this machine beside them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table

from accelbench.cli.render import console
from accelbench.errors import UsageError
from accelbench.reference.table import TASKS, accelerator_matches, references, select
from accelbench.registry import describe_params
from accelbench.results import format as fmt


def register(sub: Any) -> None:
    p = sub.add_parser(
        "reference",
        help="published results (with their sources) and dated cloud prices to hold this machine against",
        description=(
            "List the published results shipped with accelbench: four published articles' tables (tf_cnn_benchmarks on "
            "Quadro RTX 8000, TPUv2 vs V100 with prices, MLPerf v0.5 V100-PCIe/T4 ratios, DAWNBench), Lambda's "
            "PyTorch training throughput (RTX 8000 to H100, 1-8 GPUs), MLPerf Inference v4.0 ResNet-50 Offline "
            "and Server submissions, and LLM training tokens/s per GPU (torchtitan's and NeMo's llama3 tables on "
            "H100 and H200), each with the place it was read from and the fields that decide comparability. "
            "'accelbench compare RUN --reference' puts a run beside them: a ratio only where scale, model, "
            "precision, scenario, validity (and for LLM training the sequence length, full training rather than "
            "LoRA, the whole model rather than --layers) are alike, else the row reads 'n/a: tiny model' etc.\n\n"
            "--prices lists the dated cloud instance prices that --instance NAME can name (never used unless named)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", help="only this model (accelbench's name: resnet50, bert, ssd, ...)")
    p.add_argument(
        "--accelerator", help="only accelerators whose name has every word of this (e.g. 'h100', 'rtx 8000')"
    )
    p.add_argument("--task", choices=_tasks(), help="only this task (the tasks of the shipped rows)")
    p.add_argument("--prices", action="store_true", help="list the cloud instance price table instead")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(handler=cmd_reference)


def _tasks() -> tuple[str, ...]:
    """Every task the shipped rows name, so each row can be asked for (inference_offline, ...), read from the
    table rather than listed here: a row added to the data is selectable without a code change."""
    return tuple(dict.fromkeys([*TASKS, *(r.task for r in references())]))


def cmd_reference(ns: argparse.Namespace) -> int:
    from accelbench.reference.match import NOT_STATED

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
            for x in (
                r.framework,
                "precision not stated" if r.precision == NOT_STATED else r.precision,
                f"batch {r.batch_per_device}" if r.batch_per_device else "",
                f"seq {r.seq_len}" if r.seq_len else "",
                f"p99 bound {r.latency_bound_ms:g} ms" if r.latency_bound_ms is not None else "",
                r.data,
            )
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
    from accelbench.cost.price import instances

    rows = instances()
    if ns.accelerator:
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


#: below this many columns 'what differs' leaves the table for notes under it: beside five other columns it
#: would fold a word or two per line
NOTES_BELOW = 100


def beside_table(ms: list[Any], width: int) -> Group:
    """One result beside its published rows (``ms``, closest first), for a terminal ``width`` columns wide.

    'What differs' is a sentence and is given the room: the other cells are short (the source is a number,
    its reference in the caption), and in a narrow terminal the sentences are notes under the table, so
    none folds one word per line.
    """
    from rich.text import Text

    r = ms[0].result
    primary = r.metrics.get("throughput") or r.primary
    price = r.system.get("price") or {}
    title = f"{r.benchmark} {describe_params(r.benchmark, r.params)}: {fmt.outcome(r)}"
    if price:
        title += f" at ${price['usd_per_hour']:,.4g}/h ({price.get('source', '')})"
    table = Table(title=escape(title), title_justify="left", caption_justify="left", expand=True)
    # a column only where some row fills it: a ratio per device that differs from the whole system's, a
    # per-dollar figure beside a like row (the others read n/a)
    per_device = any(m.ratio_per_device is not None and m.ratio_per_device != m.ratio for m in ms)
    priced = any(m.reference_per_usd_hour is not None and m.like for m in ms)
    inline = width >= NOTES_BELOW
    table.add_column("published", ratio=2, min_width=9)
    table.add_column("figure", justify="right", max_width=8)
    table.add_column("this / published", justify="right", max_width=9)
    if per_device:
        table.add_column("per device", justify="right", max_width=7)
    if priced:
        table.add_column("per $/h: this vs published", justify="right", max_width=10)
    table.add_column("what differs", ratio=5) if inline else table.add_column("note", justify="right")
    refs = list(dict.fromkeys(m.reference.source_ref for m in ms))  # numbered in the caption
    notes = []
    for i, m in enumerate(ms):
        ref = m.reference
        # why there is no ratio leads the sentence, in the one cell wide enough for it
        said = m.comparable if m.like else f"{m.ratio_text}. Also: {m.comparable}"
        notes.append(Text(f"({chr(97 + i % 26)}) {ref.accelerator} x{ref.count}: {said}"))
        table.add_row(
            escape(f"{ref.accelerator} x{ref.count} [{refs.index(ref.source_ref) + 1}]"),
            escape(ref.figure),
            "n/a" if m.ratio is None else m.ratio_text,
            *([m.per_device_text] if per_device else []),
            *([m.per_dollar] if priced else []),
            escape(said) if inline else f"({chr(97 + i % 26)})",
        )
    unit = primary.unit if primary is not None else ""
    unlike = sum(not m.like for m in ms)
    table.caption = (
        f"ratios: this run's {unit} over the published figure (above 1: this machine is faster; a figure "
        "published per device is held against this run's per device); "
        + (f"{unlike} of {len(ms)} rows have none: n/a where the work differs (scale, model, precision, "
           "scenario, validity, sequence length, LoRA, --layers); " if unlike else "")
        + "sources: " + "; ".join(f"[{i}] {ref}" for i, ref in enumerate(refs, 1))
    )  # fmt: skip
    return Group(table) if inline else Group(table, Text("what differs:"), *notes)


def print_beside_references(results: list[Any], selector: str, as_json: bool) -> int:
    """``compare RUN --reference``: each result of the run beside the published rows of its task and model."""
    from accelbench.reference.match import closest, matches

    found = [m for r in results for m in matches(r)]
    if as_json:
        sys.stdout.write(json.dumps([m.to_dict() for m in found], indent=2) + "\n")
        return 0
    if not found:
        raise UsageError(
            f"no result of {selector} has a published counterpart (training throughput, time to accuracy or "
            "MLPerf Inference of a model in 'accelbench reference')"
        )
    for rid in dict.fromkeys(m.result.id for m in found):
        # like rows first, then the fewest differences: the more the ratio says about the machines
        console.print(beside_table(closest([m for m in found if m.result.id == rid]), console.width))
    return 0


def print_published_ratios(baseline: list[Any], candidate: list[Any]) -> None:
    """Below a comparison of two of the user's systems: what was published for the same pair of accelerators."""
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
