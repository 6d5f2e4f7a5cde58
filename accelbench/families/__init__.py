"""Benchmark families, each described once (:mod:`accelbench.families.base`): the shipped ones
(:mod:`accelbench.families.builtin`, a tuple read as it is) and any registered from outside, which are the known
ones (:mod:`accelbench.families.known`). Importing the package registers nothing."""

from accelbench.families import builtin
from accelbench.families.base import (
    COMMON_METRICS,
    PYTORCH,
    Family,
    Label,
    LabelSpec,
    Published,
    benchmark_of,
    metric_text,
    name_params,
)
from accelbench.families.known import (
    families,
    family_of,
    find_label,
    metric_texts,
    owns,
    register,
    unlike,
    unregister,
)

__all__ = [
    "COMMON_METRICS",
    "PYTORCH",
    "Family",
    "Label",
    "LabelSpec",
    "Published",
    "benchmark_of",
    "builtin",
    "families",
    "family_of",
    "find_label",
    "metric_text",
    "metric_texts",
    "name_params",
    "owns",
    "register",
    "unlike",
    "unregister",
]
