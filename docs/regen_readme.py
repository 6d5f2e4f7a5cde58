"""Re-run every ``$ accelbench ...`` example of the docs pages and the README and write its real output back.

The README and the pages in ``docs/`` promise real output; this keeps the promise when output changes. An
example is a fenced block whose first line starts with ``$ accelbench`` (or ``$ python -m accelbench``: a helper of
the package, such as the stub server an endpoint example is measured against). Every example runs, page by page
in ``PAGES`` order (the order of the commands in the old single-page README: later examples read what earlier
ones stored), in one fresh home (a new results store, no config), at 110 columns and without a terminal,
as a newcomer would run them one after the other. Run ids that later examples name (``results import
accelbench-runs/<id>``) are carried over from the run that printed them. Paths under the temporary home
are written as ``~``; trailing spaces are dropped. Each example is a bash command line (a loop is fine).
stdout is shown; stderr only for a command that exits 2 (an example of bad input). The input files the examples
read (a trace, a data set's layout) are ``docs/examples``, copied into the working folder as ``examples/``.

The README comes last and shows the shortest example of each command, copied from a docs page: a README
command that a docs page also runs takes that page's new output (it is not measured twice); any other
README command runs after the docs pages, in the same home.

    python docs/regen_readme.py            # rewrite README.md and docs/*.md in place (minutes: it measures)
    python docs/regen_readme.py --check    # list the example commands of every page, run nothing
    python docs/regen_readme.py --only "compare --reference"   # one block (and what it runs) again
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
RUN_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{4}\b")

#: docs pages whose examples build on each other, in the order they run; pages not named here run after
#: them in alphabetical order, and the README last
PAGES = (
    "run.md",
    "kernels.md",
    "train.md",
    "infer.md",
    "tta.md",
    "tune.md",
    "compare.md",
    "reference.md",
    "history.md",
    "report.md",
    "results.md",
    "system.md",
)


def pages() -> list[Path]:
    """Every page with examples, in the order they run: the docs pages (``PAGES`` first), then the README."""
    docs = sorted(DOCS.glob("*.md"), key=lambda p: (PAGES.index(p.name) if p.name in PAGES else len(PAGES), p.name))
    return [*docs, README]


def blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line indexes of the fenced blocks whose first line is an example command."""
    out, start = [], None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if start is None:
                start = i
            else:
                if start + 1 < i and lines[start + 1].startswith(("$ accelbench", "$ python -m accelbench")):
                    out.append((start + 1, i - 1))
                start = None
    return out


def commands(lines: list[str], first: int, last: int) -> list[tuple[str, list[str]]]:
    """The block's commands (continuation lines joined) and the output printed under each."""
    out: list[tuple[str, list[str]]] = []
    i = first
    while i <= last:
        if lines[i].startswith("$ "):
            cmd = lines[i][2:]
            while cmd.endswith("\\"):
                i += 1
                cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
            out.append((cmd, []))
        elif out:
            out[-1][1].append(lines[i])
        i += 1
    return out


def examples(path: Path) -> list[str]:
    """The example commands of one page, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [cmd for first, last in blocks(lines) for cmd, _ in commands(lines, first, last)]


def run(cmd: str, home: Path, work: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBENCH")}
    env |= {"HOME": str(home), "COLUMNS": "110", "XDG_CONFIG_HOME": str(home / ".config")}
    env.pop("XDG_DATA_HOME", None)
    proc = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True)
    text = proc.stdout + (proc.stderr if proc.returncode == 2 else "")
    print(f"  exit {proc.returncode}", file=sys.stderr)
    text = text.replace(str(home), "~").replace(str(work) + "/", "")
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def check(only: str | None = None) -> int:
    """Print each page's example commands (those ``--only`` selects), and where a README example is copied from."""
    ran: dict[str, str] = {}
    for path in pages():
        lines = path.read_text(encoding="utf-8").splitlines()
        shown = False
        for first, last in blocks(lines):
            cmds = commands(lines, first, last)
            if only and not any(only in c for c, _ in cmds) and not (path == README and all(c in ran for c, _ in cmds)):
                continue
            for cmd, _ in cmds:
                if not shown:
                    print(f"# {_name(path)}")
                    shown = True
                copied = f"  (output copied from {ran[cmd]})" if path == README and cmd in ran else ""
                print(cmd + copied)
                if path != README:
                    ran.setdefault(cmd, _name(path))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="list the commands and run nothing")
    ap.add_argument(
        "--only", metavar="TEXT", help="re-run only the blocks with a command containing TEXT (in a fresh home)"
    )
    args = ap.parse_args()
    if args.check:
        return check(args.only)
    ids: dict[str, str] = {}
    #: the new output of each docs command (its first run), which the README's copies take
    outputs: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="accelbench-readme-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        shutil.copytree(DOCS / "examples", work / "examples")  # the input files the examples read
        for path in pages():
            lines = path.read_text(encoding="utf-8").splitlines()
            replaced: list[tuple[int, int, list[str]]] = []
            for first, last in blocks(lines):
                cmds = commands(lines, first, last)
                copies = path == README and all(c in outputs for c, _ in cmds)
                if args.only and not copies and not any(args.only in c for c, _ in cmds):
                    continue
                new: list[str] = []
                for cmd, old_output in cmds:
                    shown = cmd
                    for old, now in ids.items():
                        cmd = cmd.replace(old, now)
                    if path == README and shown in outputs:
                        output = outputs[shown]
                    else:
                        print(f"$ {cmd}  [{_name(path)}]", file=sys.stderr)
                        output = run(cmd, home, work)
                        if path != README:
                            outputs.setdefault(shown, output)
                    # ids the old output printed, in order, stand for those the new output printed
                    for old, now in zip(RUN_ID.findall("\n".join(old_output)), RUN_ID.findall(output), strict=False):
                        ids.setdefault(old, now)
                    for old, now in ids.items():
                        shown = shown.replace(old, now)
                    new.append(f"$ {shown}")
                    new.extend(output.splitlines() if output else [])
                replaced.append((first, last, new))
            if not replaced:
                continue
            for first, last, new in reversed(replaced):
                lines[first : last + 1] = _rewrap(new)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


def _rewrap(lines: list[str]) -> list[str]:
    """Long example commands folded at 110 columns with a backslash, as the pages write them."""
    out = []
    for line in lines:
        if line.startswith("$ ") and len(line) > 110:
            words, cur = line.split(" "), ""
            for w in words:
                if cur and len(cur) + len(w) + 3 > 110:
                    out.append(cur + " \\")
                    cur = "    " + w
                else:
                    cur = f"{cur} {w}" if cur else w
            out.append(cur)
        else:
            out.append(line)
    return out


if __name__ == "__main__":
    sys.exit(main())
