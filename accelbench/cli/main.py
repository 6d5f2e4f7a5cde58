"""``accelbench``: the entry point. Builds the parser (no torch import) and turns errors into one line."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from accelbench import __version__
from accelbench.cli import (
    commands_cache,
    commands_history,
    commands_info,
    commands_measure,
    commands_mlperf,
    commands_reference,
    commands_report,
    commands_results,
    commands_tune,
)
from accelbench.cli.args import Parser
from accelbench.errors import UsageError

DESCRIPTION = """\
accelbench measures how fast this machine trains and serves neural networks, stores every
result in one place, and compares machines, precisions and prices.

quick start:
  accelbench run                   run the default suite (quick on a CPU, standard on a GPU)
  accelbench kernels gemm --m 4096 --n 4096 --k 4096 --precision bf16
  accelbench tune resnet50 --budget 10m   the fastest settings of a model here, confirmed side by side
  accelbench results list          what has been measured
  accelbench compare RUN_A RUN_B   ratios with a verdict that respects noise (and per dollar, when priced)
  accelbench compare RUN --reference   this run beside published results (accelbench reference)
  accelbench report -o r/          the latest run as r/report.html and r/report.md
"""


def build_parser() -> Parser:
    parser = Parser(
        prog="accelbench",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands_measure.register(sub)
    commands_tune.register(sub)
    commands_results.register(sub)
    commands_history.register(sub)
    commands_report.register(sub)
    commands_reference.register(sub)
    commands_info.register(sub)
    commands_cache.register(sub)
    commands_mlperf.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        (getattr(args, "help_parser", None) or parser).print_help()
        return 0
    try:
        return int(args.handler(args) or 0)
    except UsageError as exc:
        sys.stderr.write(f"accelbench: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("accelbench: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
