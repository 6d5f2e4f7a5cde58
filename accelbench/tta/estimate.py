"""How long a time-to-accuracy entry can take: a bound, every seed to its epoch cap at a step's launch floor (a run
that reaches its target sooner ends sooner); a recipe reading its data from a folder only says its build."""

from __future__ import annotations

from accelbench.kit.estimate import Target, short, summed
from accelbench.tta.recipes import recipe
from accelbench.tta.specs import TtaParams
from accelbench.workloads.base import batch_class


def tta(p: TtaParams, target: Target) -> tuple[float, str]:
    """``tta/time_to_target``: ``--seeds`` runs of the recipe's epochs (``--max-epochs``), a bound."""
    costs = target.costs
    r = recipe(p.workload)
    epochs = p.max_epochs or r.max_epochs
    if r.needs_data_dir:
        build = costs.model_build
        return build, f"build {short(build)}; its epochs' length is unknown before it reads its data"
    train, _ = r.load(None, p.scale)
    batch = p.batch_size or r.batch_size[batch_class(target.device)]
    steps = epochs * r.steps_per_epoch(train, batch)
    runs = p.seeds
    bound = f"{runs} x {epochs} epochs ({steps} steps, a bound)"
    return summed([("build", costs.model_build), (bound, runs * steps * costs.step_floor)])
