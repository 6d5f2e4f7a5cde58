"""Does ``accelbench tune MODEL --task serve``'s winner reproduce, and how far is it above the default settings?

Runs the search (``--budget``, its JSON summary), then, alternating, the command it printed for the winner and
``accelbench infer MODEL`` with the default settings held to the same ``--tpot-ms`` (``--rounds`` times each,
each an ordinary run in its own process, in one results store), and prints:

* the winner's confirmed figure (the median of its confirmations in the search) and the reproduced figure (the
  median of the reproducing runs), and their ratio: the reproduction goal is 0.8-1.25x on a 2-core shared host
  (LoadGen's quick profile runs a few seconds; the spread of the search's own confirmations is printed beside);
* the reproduced winner over the default settings, measured side by side in this run;
* whether every reproducing run was VALID (within the TPOT limit).

    python bench/tune_serve.py [--model llama3.1-8b] [--budget 4m] [--tpot-ms 10] [--rounds 3] [-- extra tune flags]

Measured on the 2-core AMD EPYC (Zen 4), 2026-11-24, ``--budget 5m --tpot-ms 20``: the winner ``static fp32 32 in
flight``, 11,145 tokens/s confirmed (10,211-11,571), reproduced at 12,643 (12,601-13,223, 3 of 3 VALID): 1.134x;
the default settings beside it 3,570 (2,893-3,595): the reproduced winner 3.54x them.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def accelbench(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {"ACCELBENCH_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home)}
    import os

    env = os.environ | env
    return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True, text=True, env=env)


def figure(run: subprocess.CompletedProcess[str]) -> tuple[float, bool]:
    """tokens/s and VALID of a ``--json`` infer run's one record."""
    doc = json.loads(run.stdout)
    (record,) = doc["results"] if isinstance(doc, dict) else doc
    return record["metrics"]["tokens_per_second"]["value"], record["valid"] is True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama3.1-8b")
    ap.add_argument("--budget", default="4m")
    ap.add_argument("--tpot-ms", default="10")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("extra", nargs="*", help="more tune flags (after --)")
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tune-serve-"))
    db = str(home / "r.db")
    tune = ["tune", a.model, "--scale", "tiny", "--tpot-ms", a.tpot_ms, "--budget", a.budget]
    tune += ["--no-compile", "--db", db, "--json", *a.extra]
    print("$ accelbench " + shlex.join(tune), flush=True)
    done = accelbench(tune, home)
    if done.returncode != 0:
        print(done.stderr[-3000:])
        return 1
    summary = json.loads(done.stdout)["summary"]
    d = summary["details"]
    if d.get("outcome") != "winner":
        print(f"no winner to reproduce: {d.get('outcome')}: {summary.get('reason') or d.get('verdict')}")
        return 1
    winner = next(r for r in d["ranking"] if r["status"] == "winner")
    confirmed = winner["figure"]
    print(f"winner: {winner['label']}: {confirmed:,.0f} tokens/s (confirmations {winner['confirmations']})")
    print(f"reproduce: {d['reproduce']}", flush=True)
    again = shlex.split(d["reproduce"])[1:] + ["--db", db, "--json"]
    default = ["infer", a.model, "--scale", "tiny", "--tpot-ms", a.tpot_ms, "--db", db, "--json"]
    reproduced, defaults, valid = [], [], []
    for r in range(1, a.rounds + 1):
        for name, args, into in (("winner", again, reproduced), ("default", default, defaults)):
            tps, ok = figure(accelbench(args, home))
            into.append(tps)
            valid.append(ok) if name == "winner" else None
            print(f"round {r}: {name} {tps:,.0f} tokens/s{'' if ok else ' INVALID'}", flush=True)
    rep, base = statistics.median(reproduced), statistics.median(defaults)
    print(f"\nreproduced / confirmed: {rep:,.0f} / {confirmed:,.0f} = {rep / confirmed:.3f}x (goal 0.8-1.25x)")
    print(f"reproduced winner / default settings, side by side: {rep:,.0f} / {base:,.0f} = {rep / base:.2f}x")
    print(f"reproducing runs VALID (within --tpot-ms {a.tpot_ms}): {sum(valid)} of {len(valid)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
