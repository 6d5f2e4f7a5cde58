"""Which families are known: the shipped ones (:data:`accelbench.families.builtin.BUILTIN`, read as they are) and
any registered from outside (:func:`register`), and a metric's label as the known families' tables give it.

Nothing registers on import: the shipped families are a tuple this module reads, and :func:`register` keeps a
user's own (a family of the same name as a shipped one stands in its place until :func:`unregister`).
"""

from __future__ import annotations

from accelbench.families.base import COMMON_METRICS, Family, Label, LabelSpec, metric_text
from accelbench.families.builtin import BUILTIN
from accelbench.results.record import Result

#: the families registered from outside, by name (a test's, a plugin's)
_REGISTERED: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Make ``family`` known by its name (a second one of the same name replaces the first, a shipped one
    included): its records then read through its description everywhere."""
    if not family.name or "/" in family.name:
        raise ValueError(f"a family's name is one word before the benchmark's '/': {family.name!r}")
    _REGISTERED[family.name] = family
    return family


def unregister(name: str) -> None:
    """Forget a family registered for a while (a test's); a shipped family it stood in for is read again."""
    _REGISTERED.pop(name, None)


def families() -> list[Family]:
    """Every known family, in the order the report shows them: the shipped ones (each replaced by a registered
    family of its name), then those registered, in the order they were, then those installed packages declare
    (:mod:`accelbench.plugins`: ``family.NAME = module:FAMILY``, a :class:`Family` instance)."""
    shipped = [_REGISTERED.get(f.name, f) for f in BUILTIN]
    names = {f.name for f in BUILTIN}
    own = shipped + [f for name, f in _REGISTERED.items() if name not in names]
    taken = {f.name for f in own}
    return own + [f for f in _installed() if f.name not in taken]


def _installed() -> list[Family]:
    from accelbench.errors import UsageError
    from accelbench.plugins import installed, load_object

    out = []
    for name, path in installed("family").items():
        family = load_object(path, "family")
        if not isinstance(family, Family):
            raise UsageError(f"{path!r} (family.{name}) is not an accelbench.families.Family")
        out.append(family)
    return out


def family_of(benchmark: str) -> Family | None:
    """The family a benchmark belongs to: the one that names it whole (:attr:`Family.benchmarks`), else the one
    named by the word before its ``/``; None for a name of no known family (an old or foreign record)."""
    known = families()
    claimed = next((f for f in known if benchmark in f.benchmarks), None)
    if claimed is not None:
        return claimed
    name = benchmark.partition("/")[0]
    return next((f for f in known if f.name == name), None)


def owns(family: Family, benchmark: str) -> bool:
    """Whether ``benchmark`` (a record's or a registry's name) is one of ``family``'s."""
    return family_of(benchmark) is family


def unlike(b: Result, c: Result) -> list[str]:
    """The records' family's own reasons their figures do not measure the same thing (its ``Family.unlike``), for
    the one judge: what a caller of :func:`accelbench.results.judge.unlike` or ``compare`` hands over as ``rules``."""
    family = family_of(b.benchmark)
    if family is None or family.unlike is None or not owns(family, c.benchmark):
        return []
    return family.unlike(b, c)


def find_label(name: str, family: Family | None = None) -> tuple[Label, str] | None:
    """Metric ``name``'s label, with the part of the name a ``prefix_*`` pattern matched; None where the metric
    is not shown.

    The family's own table first, then the common one, then the other families' (a figure one family defines
    reads the same wherever it appears), else its name in words before the figure. In each table an exact name
    wins over a pattern, and a longer pattern over a shorter one.
    """
    tables = [family.metrics] if family is not None else []
    tables += [COMMON_METRICS, *(f.metrics for f in families() if f is not family)]
    for source in tables:
        if name in source:
            return _as_label(source[name], name)
    for source in tables:
        prefixes = sorted((k[:-1] for k in source if k.endswith("*")), key=len, reverse=True)
        for prefix in prefixes:
            if name.startswith(prefix):
                return _as_label(source[prefix + "*"], name.removeprefix(prefix))
    words = name.removesuffix("_gbps").removesuffix("_tflops").replace("_", " ")
    return Label(words.replace("{", "{{").replace("}", "}}") + " {metric}"), name


def _as_label(spec: LabelSpec, stem: str) -> tuple[Label, str] | None:
    if spec is None:
        return None
    return (spec if isinstance(spec, Label) else Label(spec)), stem


def metric_texts(r: Result) -> list[str]:
    """``r``'s metrics other than its primary figure, in words, as its family's labels say (those marked
    first before the others; those not shown left out): the details of a results table's row."""
    family = family_of(r.benchmark)
    primary = r.primary
    found = [(name, m, find_label(name, family)) for name, m in r.metrics.items()]
    shown = []
    for name, m, hit in sorted(found, key=lambda x: not (x[2] is not None and x[2][0].first)):
        if hit is None or name == r.primary_metric:
            continue
        label, stem = hit
        if label.unless_primary and primary is not None and m.value == primary.value:
            continue
        shown.append(metric_text(r, name, m, label, stem))
    return shown
