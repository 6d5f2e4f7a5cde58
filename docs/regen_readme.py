"""Re-run every ``$ accelbench ...`` example of the README and write its real output back.

The README promises real output; this keeps the promise when output changes. Every example runs, in
README order, in one fresh home (a new results store, no config), at 110 columns and without a terminal,
as a newcomer would run them one after the other. Run ids that later examples name (``results import
accelbench-runs/<id>``) are carried over from the run that printed them. Paths under the temporary home
are written as ``~``; trailing spaces are dropped. Each example is a bash command line (a loop is fine).
stdout is shown; stderr only for a command that exits 2
(an example of bad input).

    python docs/regen_readme.py            # rewrite README.md in place (minutes: it measures)
    python docs/regen_readme.py --check    # list the example commands only
    python docs/regen_readme.py --only "compare --reference"   # one block (and what it runs) again
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{4}\b")


def blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line indexes of the fenced blocks whose first line is an example command."""
    out, start = [], None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if start is None:
                start = i
            else:
                if start + 1 < i and lines[start + 1].startswith("$ accelbench"):
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


def run(cmd: str, home: Path, work: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBENCH")}
    env |= {"HOME": str(home), "COLUMNS": "110", "XDG_CONFIG_HOME": str(home / ".config")}
    env.pop("XDG_DATA_HOME", None)
    proc = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True)
    text = proc.stdout + (proc.stderr if proc.returncode == 2 else "")
    print(f"  exit {proc.returncode}", file=sys.stderr)
    text = text.replace(str(home), "~").replace(str(work) + "/", "")
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="list the commands and run nothing")
    ap.add_argument(
        "--only", metavar="TEXT", help="re-run only the blocks with a command containing TEXT (in a fresh home)"
    )
    args = ap.parse_args()
    readme = ROOT / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    found = blocks(lines)
    if args.only:
        found = [(f, last) for f, last in found if any(args.only in c for c, _ in commands(lines, f, last))]
    if args.check:
        for first, last in found:
            for cmd, _ in commands(lines, first, last):
                print(cmd)
        return 0
    ids: dict[str, str] = {}
    replaced: list[tuple[int, int, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="accelbench-readme-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        for first, last in found:
            new: list[str] = []
            for cmd, old_output in commands(lines, first, last):
                shown = cmd
                for old, now in ids.items():
                    cmd = cmd.replace(old, now)
                print(f"$ {cmd}", file=sys.stderr)
                output = run(cmd, home, work)
                # ids the old output printed, in order, stand for those the new output printed
                for old, now in zip(RUN_ID.findall("\n".join(old_output)), RUN_ID.findall(output), strict=False):
                    ids.setdefault(old, now)
                for old, now in ids.items():
                    shown = shown.replace(old, now)
                new.append(f"$ {shown}")
                new.extend(output.splitlines() if output else [])
            replaced.append((first, last, new))
    for first, last, new in reversed(replaced):
        lines[first : last + 1] = _rewrap(new)
    readme.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


def _rewrap(lines: list[str]) -> list[str]:
    """Long example commands folded at 110 columns with a backslash, as the README writes them."""
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
