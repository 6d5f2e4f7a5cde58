"""Benchmark families, each described once (:mod:`accelbench.families.base`), and the shipped ones
(:mod:`accelbench.families.builtin`), registered on import."""

from accelbench.families import builtin
from accelbench.families.base import (
    COMMON_METRICS,
    PYTORCH,
    Family,
    Label,
    LabelSpec,
    Published,
    benchmark_of,
    families,
    family_of,
    find_label,
    metric_text,
    metric_texts,
    name_params,
    register,
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
    "register",
    "unregister",
]
