"""Sources are named by what they are, never by the file a contributor read them from (issue 27): no text in
the package, and nothing the reference listing prints, cites "seed 001" or "003_89b1f2d6458a42c1.txt"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accelbench.cli.main import main

PACKAGE = Path(__file__).resolve().parent.parent / "accelbench"
#: an internal source-file name: "seed 001", "seed_003", "Seed 000's", "004_ff1d05377d870819.txt"
INTERNAL = re.compile(r"seed[ _]0\d\d|\b\d{3}_[0-9a-f]{16}\.txt\b", re.IGNORECASE)


def _hits(text: str) -> list[str]:
    # a table folds a long cell over lines: the name is looked for with the whitespace taken out as well
    return INTERNAL.findall(text) + INTERNAL.findall(re.sub(r"\s+", "", text))


def test_no_package_file_cites_an_internal_source_file_name() -> None:
    files = [p for p in PACKAGE.rglob("*") if p.suffix in {".py", ".toml", ".csv", ".md", ".json"} and p.is_file()]
    assert len(files) > 50 and any(p.name == "reference_results.csv" for p in files)
    found = {
        f"{p.relative_to(PACKAGE.parent)}:{n}": m.group(0)
        for p in files
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if (m := INTERNAL.search(line))
    }
    assert not found, found


def test_the_reference_listing_names_each_source_by_what_it_is(capsys) -> None:
    assert main(["reference"]) == 0
    table = capsys.readouterr().out
    assert "Quadro RTX 8000" in table and not _hits(table), _hits(table)
    assert main(["reference", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 100
    for r in rows:
        text = " ".join(str(v) for v in r.values())
        assert not INTERNAL.search(text), text
    # the articles are cited by title and what they measured, and the two that give a date carry it
    refs = {
        r["source_ref"]: r["published"] for r in rows if not re.match(r"^[\w.-]+/[\w.-]+@[0-9a-f]+:", r["source_ref"])
    }
    assert len(refs) == 4 and all(re.search(r'"[^"]+" \(', ref) for ref in refs)
    quadro = next(ref for ref in refs if "tf_cnn_benchmarks" in ref)
    assert refs[quadro] == "2020-02-15" and "4x Quadro RTX 8000" in quadro
    dell = next(ref for ref in refs if "MLPerf Training v0.5" in ref)
    assert refs[dell] == "2019-03" and "Dell knowledge-base article 000132094" in dell
    with pytest.raises(SystemExit):
        main(["reference", "--help"])
    assert not _hits(capsys.readouterr().out)
