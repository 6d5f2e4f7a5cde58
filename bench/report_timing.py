"""How long does ``accelbench report`` take for a large store? The goal: 1,000 records in under 10 s.

Builds a store of N records from the real records the report tests use (every family, find-peak trials,
tta curves), spread over runs and two systems so that comparisons and history have work to do, then
times the whole command (selection, sections, every chart drawn as SVG and PNG, both files written).

    python bench/report_timing.py [--records 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from pathlib import Path

from accelbench.cli.main import main
from accelbench.results.record import Result, new_id
from accelbench.results.store import RunInfo, Store

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "report_store.json"


def make_store(path: Path, n: int) -> None:
    seed = [Result.from_dict(d) for d in json.loads(DATA.read_text())["records"]]
    with Store(path) as store:
        i = 0
        while i < n:
            run = i // len(seed)
            fp = "a" * 16 if run % 2 == 0 else "b" * 16
            run_id = f"20260101-{run:06d}-{fp[:4]}"
            store.add_run(RunInfo(run_id, f"2026-01-01T{run % 24:02d}:00:00", "bench", {}, fp, {}))
            batch = []
            for r in seed[: n - i]:
                c = Result.from_dict(copy.deepcopy(r.to_dict()))
                c.id, c.run_id = new_id(), run_id
                c.started_at = c.ended_at = f"2026-01-{1 + run // 24:02d}T{run % 24:02d}:00:00.000+00:00"
                c.system["fingerprint"] = fp
                c.system.setdefault("profile", {})["hostname"] = f"host-{fp[:1]}"
                for m in c.metrics.values():
                    m.value *= 1 + (run % 7) / 100
                batch.append(c)
            store.add_many(batch)
            i += len(batch)


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        make_store(db, args.records)
        times = []
        for k in range(args.rounds):
            t0 = time.perf_counter()
            assert main(["report", "--all", "--db", str(db), "-o", f"{tmp}/r{k}"]) == 0
            times.append(time.perf_counter() - t0)
        with Store(db, readonly=True) as s:
            count = s.count()
        html = (Path(tmp) / "r0" / "report.html").stat().st_size
    print(f"records: {count}; report.html {html / 1e6:.2f} MB")
    print(f"report --all, html+md: median {statistics.median(times):.2f} s, min {min(times):.2f} s over {len(times)}")
    print(f"goal: under 10 s for 1,000 records -> {'met' if statistics.median(times) < 10 else 'NOT met'}")


if __name__ == "__main__":
    main_()
