import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from helpers import make_result

from accelbench.errors import UsageError
from accelbench.results.record import Result, schema_errors, validate
from accelbench.results.store import Store


def test_round_trip(store):
    r = make_result(tags={"gpu": "none"})
    assert store.add(r)
    assert not store.add(r)  # same id: stored once
    back = store.get(r.id[:8])
    assert back.to_dict() == r.to_dict()
    assert store.query(tags={"gpu": "none"})[0].id == r.id
    assert store.query(tags={"gpu": "v100"}) == []
    assert store.query(benchmark="kernels")[0].id == r.id


def test_every_status_validates_and_bad_records_do_not():
    for status in ("ok", "failed", "skipped"):
        assert schema_errors(make_result(status=status).to_dict()) == []
    bad = make_result().to_dict()
    bad["status"] = "great"
    assert schema_errors(bad)
    no_error = make_result(status="failed").to_dict()
    no_error["error"] = None
    assert schema_errors(no_error)
    no_metrics = make_result().to_dict()
    no_metrics["metrics"] = {}
    assert schema_errors(no_metrics)
    with pytest.raises(UsageError, match="not a valid accelbench result"):
        validate({"id": "x"})


def test_invalid_record_is_not_stored(store):
    r = make_result()
    r.benchmark = "Not A Name"
    with pytest.raises(UsageError):
        store.add(r)
    assert store.count() == 0


def test_unwritable_store_is_a_usage_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):  # running as root: permissions do not bind
            blocker = tmp_path / "file"
            blocker.write_text("x")
            target = blocker / "sub" / "db.sqlite"
        else:
            target = ro / "db.sqlite"
        with pytest.raises(UsageError, match="cannot write results store"):
            Store(target)
    finally:
        os.chmod(ro, 0o700)
    with pytest.raises(UsageError, match="is a directory"):
        Store(tmp_path)


def test_readonly_open_of_missing_store(tmp_path):
    with pytest.raises(UsageError, match="no results store"):
        Store(tmp_path / "none.db", readonly=True)


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from helpers import make_result
    from accelbench.results.store import Store
    s = Store({db!r})
    for i in range(150):
        s.add(make_result(run_id="run-" + sys.argv[1], value=i + 1.0))
    """
)


def test_two_concurrent_writers_lose_nothing(tmp_path):
    db = tmp_path / "shared.db"
    Store(db).close()
    code = WRITER.format(tests=os.path.dirname(__file__), db=str(db))
    procs = [subprocess.Popen([sys.executable, "-c", code, name]) for name in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    s = Store(db)
    assert s.count() == 300
    assert len(s.query(run_id="run-a")) == 150 and len(s.query(run_id="run-b")) == 150
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    for (blob,) in conn.execute("SELECT record_json FROM results"):
        validate(json.loads(blob))


def test_ambiguous_and_unknown_ids(store):
    a = make_result()
    store.add(a)
    with pytest.raises(UsageError, match="no result"):
        store.get("ffffffffffff")
    assert store.resolve_run_id("run-") == "run-a"
    assert store.resolve_run_id("nope") is None
    store.add(make_result(run_id="run-b"))
    with pytest.raises(UsageError, match="matches several runs"):
        store.resolve_run_id("run-")
    assert store.resolve_run_id("-b") == "run-b"  # any unique part: the random suffix of a run id


def test_result_from_dict_ignores_nothing_it_knows():
    r = make_result()
    assert Result.from_json(r.to_json()).to_dict() == r.to_dict()


def _v1_infer_record() -> dict:
    """A record as accelbench 0.2 (schema 1) stored an Offline LoadGen run."""
    r = make_result()
    d = r.to_dict() | {"benchmark": "infer/loadgen", "schema_version": 1, "primary_metric": "samples_per_second"}
    del d["valid"]
    d["params"] = {"model": "resnet18", "scenario": "offline", "devices": 2, "valid": True, "device": "cpu"}
    metric = {"value": 10.0, "unit": "samples/s", "higher_is_better": True, "ci95": None, "n": None}
    d["metrics"] = {"samples_per_second": metric, "samples_per_second_per_device": metric | {"value": 5.0}}
    return d


def test_version_1_records_read_as_today(store, tmp_path):
    """An outcome moved out of params and names unified in schema 2; old stores and exports still read."""
    old = _v1_infer_record()
    kernel = make_result().to_dict() | {"schema_version": 1, "id": "f" * 32}
    del kernel["valid"]
    kernel["params"] = dict(kernel["params"], warmup=0.2)
    path = tmp_path / "old.json"
    path.write_text(json.dumps([old, kernel]))
    from accelbench.results.exchange import import_path

    assert import_path(store, path)[0] == 2
    r = store.get(old["id"])
    assert r.schema_version == 3 and r.valid is True and "valid" not in r.params
    assert r.params["nproc"] == 2 and "devices" not in r.params
    assert r.primary_metric == "throughput" and r.primary.value == 10.0
    assert r.metrics["throughput_per_device"].value == 5.0 and "samples_per_second" not in r.metrics
    assert store.get("f" * 32).params["warmup_time"] == 0.2


def test_a_record_from_a_newer_accelbench_is_refused_in_one_line(store, tmp_path):
    newer = make_result().to_dict() | {"schema_version": 99}
    path = tmp_path / "new.json"
    path.write_text(json.dumps([newer]))
    from accelbench.results.exchange import import_path

    with pytest.raises(UsageError, match="schema version 99, newer than this accelbench reads"):
        import_path(store, path)
