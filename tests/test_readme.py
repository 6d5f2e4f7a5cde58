"""The README is a way in: both commands near the top, short, its links alive, its examples real (issue 27).

Nothing here measures: the examples are read, never run (``docs/regen_readme.py`` runs them).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
INSTALL_AND_RUN = "pip install . && accelbench run"
#: an internal source-file name: "seed 001", "seed_003", "Seed 000's", "004_ff1d05377d870819.txt"
INTERNAL = re.compile(r"seed[ _]0\d\d|\b\d{3}_[0-9a-f]{16}\.txt\b", re.IGNORECASE)


def _regen():
    spec = importlib.util.spec_from_file_location("regen_readme", DOCS / "regen_readme.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fenced(lines: list[str]) -> list[list[str]]:
    """The contents of every fenced block."""
    out, cur = [], None
    for line in lines:
        if line.startswith("```"):
            if cur is None:
                cur = []
            else:
                out.append(cur)
                cur = None
        elif cur is not None:
            cur.append(line)
    return out


def _ci_test_command() -> str:
    """The test command ``.ci/run`` runs (it runs the README's, verbatim)."""
    found = [
        line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if re.search(r"&& pytest\b", line)
    ]
    assert len(found) == 1, found
    return found[0]


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> str:
    """The text outside the example blocks (whose output the CLI printed)."""
    lines = text.splitlines()
    regen = _regen()
    drop = {i for first, last in regen.blocks(lines) for i in range(first, last + 1)}
    return "\n".join(line for i, line in enumerate(lines) if i not in drop)


def _internal_names(text: str) -> list[str]:
    # a table folds a long cell over lines: look with the whitespace taken out as well
    return INTERNAL.findall(text) + INTERNAL.findall(re.sub(r"\s+", "", text))


def test_both_commands_are_in_the_first_20_lines_in_fenced_blocks() -> None:
    top = README.read_text(encoding="utf-8").splitlines()[:20]
    blocks = _fenced(top)
    assert [INSTALL_AND_RUN] in blocks, blocks
    assert [_ci_test_command()] in blocks, blocks


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    assert _ci_test_command() == "pip install -e '.[test]' && pytest"
    commands = [b for b in _fenced(README.read_text(encoding="utf-8").splitlines()) if any("pytest" in x for x in b)]
    assert commands == [[_ci_test_command()]], commands


def test_the_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < 250


def test_every_page_the_readme_links_exists() -> None:
    links = re.findall(r"\]\((docs/[^)#\s]*)", README.read_text(encoding="utf-8"))
    pages = {link for link in links if link.endswith(".md")}
    assert len(pages) >= 15, pages
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing
    # and every docs page is reachable from the README
    assert {f"docs/{p.name}" for p in DOCS.glob("*.md")} <= pages


def test_the_docs_pages_link_to_pages_that_exist() -> None:
    missing = []
    for page in DOCS.glob("*.md"):
        for link in re.findall(r"\]\(([^)#\s:]+)", page.read_text(encoding="utf-8")):
            if not (page.parent / link).exists():
                missing.append(f"{page.name}: {link}")
    assert not missing, missing


def test_no_page_names_a_source_by_its_internal_file_name() -> None:
    found = {p.name: _internal_names(_prose(p.read_text(encoding="utf-8"))) for p in _pages()}
    assert not any(found.values()), {k: v for k, v in found.items() if v}


def test_no_example_output_names_a_source_by_its_internal_file_name() -> None:
    found = {p.name: _internal_names(p.read_text(encoding="utf-8")) for p in _pages()}
    assert not any(found.values()), {k: v for k, v in found.items() if v}


def test_the_regenerator_finds_the_examples_of_the_readme_and_of_every_docs_page() -> None:
    regen = _regen()
    pages = regen.pages()
    assert pages[-1] == README  # the README last: its examples are copies of the docs pages'
    assert {p.name for p in pages[:-1]} == {p.name for p in DOCS.glob("*.md")}
    found = {p.name: regen.examples(p) for p in pages}
    for name in ("README.md", "run.md", "kernels.md", "train.md", "infer.md", "tta.md", "compare.md", "results.md"):
        assert found[name], name
    assert "accelbench run --dry-run" in found["README.md"]
    assert "accelbench compare tag:threads=1 tag:threads=2" in found["compare.md"]
    # the README measures nothing of its own: each of its examples is a docs page's
    in_docs = {c for p in pages[:-1] for c in found[p.name]}
    assert set(found["README.md"]) <= in_docs, set(found["README.md"]) - in_docs


def test_the_readme_examples_are_verbatim_copies_of_the_docs_examples() -> None:
    docs = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.glob("*.md"))
    lines = README.read_text(encoding="utf-8").splitlines()
    regen = _regen()
    examples = [lines[first : last + 1] for first, last in regen.blocks(lines)]
    assert len(examples) >= 6
    for block in examples:
        assert "\n".join(block) in docs, block[0]


def test_regen_check_lists_the_commands_of_every_page() -> None:
    out = subprocess.run(
        [sys.executable, str(DOCS / "regen_readme.py"), "--check"], capture_output=True, text=True, check=True
    ).stdout
    assert "# README.md" in out and "# docs/run.md" in out and "# docs/compare.md" in out
    assert "accelbench run --dry-run  (output copied from docs/run.md)" in out
    only = subprocess.run(
        [sys.executable, str(DOCS / "regen_readme.py"), "--check", "--only", "compare tag"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert only.splitlines() == [
        "# docs/compare.md",
        "accelbench kernels gemm --m 1024 --n 1024 --k 1024 --threads 1 --repeat 3 --tag threads=1",
        "accelbench kernels gemm --m 1024 --n 1024 --k 1024 --threads 2 --repeat 3 --tag threads=2",
        "accelbench compare tag:threads=1 tag:threads=2",
        "# README.md",
        "accelbench compare tag:threads=1 tag:threads=2  (output copied from docs/compare.md)",
    ]


def _xla_install_in_docs() -> list[str]:
    """The fenced block of docs/run.md that installs PyTorch/XLA."""
    lines = (DOCS / "run.md").read_text(encoding="utf-8").splitlines()
    found = [b for b in _fenced(lines) if b and b[0].startswith("pip install torch==")]
    assert len(found) == 1, found
    return found[0]


def test_the_xla_install_is_the_same_in_the_docs_the_readme_and_ci() -> None:
    """A plain install beside torch_xla upgrades torch and breaks it: the documented one is the one CI proves."""
    docs = _xla_install_in_docs()
    assert len(docs) == 3 and docs[1].startswith("pip freeze") and "-c constraints.txt" in docs[2], docs
    # the README's xla row: its code spans that are commands, a table's escaped pipes read as pipes
    [row] = [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| `xla`")]
    spans = [s.replace("\\|", "|") for s in re.findall(r"`((?:[^`\\]|\\.)+)`", row)]
    assert [s for s in spans if s.startswith("pip ")] == docs
    # .ci/xla runs the same lines, in order, one after the other
    ci = [line.strip() for line in (ROOT / ".ci" / "xla").read_text(encoding="utf-8").splitlines()]
    assert docs[0] in ci, ci
    start = ci.index(docs[0])
    assert ci[start : start + len(docs)] == docs
    assert subprocess.run(["bash", "-n", str(ROOT / ".ci" / "xla")], check=False).returncode == 0
