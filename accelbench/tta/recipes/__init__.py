"""Time-to-accuracy workloads by name: each a recipe known to reach its target (see :mod:`.base`)."""

from __future__ import annotations

import difflib

from accelbench.errors import UsageError
from accelbench.plugins import load_class
from accelbench.tta.recipes.base import Recipe

RECIPES: dict[str, str] = {
    "digits": "accelbench.tta.recipes.small:Digits",
    "mnist": "accelbench.tta.recipes.small:Mnist",
    "cifar10": "accelbench.tta.recipes.cifar:Cifar10",
    "imagenet": "accelbench.tta.recipes.imagenet:ImageNet",
    "movielens": "accelbench.tta.recipes.movielens:MovieLens",
    "llama3.1-8b-text": "accelbench.tta.recipes.text:Llama31Text",
    "ssd": "accelbench.tta.recipes.detection:Ssd",
    "maskrcnn": "accelbench.tta.recipes.detection:MaskRcnn",
    "gnmt": "accelbench.tta.recipes.translation:Gnmt",
    "transformer": "accelbench.tta.recipes.translation:Transformer",
}


def recipe(name: str) -> Recipe:
    if ":" in name:
        return load_class(name, Recipe, "tta workload")()  # type: ignore[type-abstract]  # (python/mypy#4717)
    if name not in RECIPES:
        close = difflib.get_close_matches(name, list(RECIPES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; workloads: {', '.join(RECIPES)}"
        raise UsageError(f"unknown tta workload {name!r}{hint}")
    return load_class(RECIPES[name], Recipe, "tta workload")()  # type: ignore[type-abstract]
