"""Parameters of the time-to-accuracy benchmark (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError
from accelbench.kit.ranks import check_nproc
from accelbench.params import CommonParams, EmulatedParams, NodesParams, ScaleParams, opt, positive
from accelbench.tta.recipes import recipe

TTA_PRECISIONS = ("auto", "fp32", "amp_fp16", "amp_bf16")


@dataclass(frozen=True)
class TtaParams(EmulatedParams, ScaleParams, NodesParams, CommonParams):
    """Train ``workload`` on real data until its quality target, ``seeds`` times; score the olympic mean."""

    workload: str = opt(
        "digits",
        "digits, mnist, cifar10, imagenet, movielens, ssd, maskrcnn, gnmt, transformer, llama3.1-8b-text, or "
        "package.module:Class",
        sweep=False,
    )
    target: float = opt(
        0.0,
        "quality target of the workload's metric (0: its own: digits 0.98, mnist 0.99, cifar10 0.94, ssd's mAP "
        "0.212, maskrcnn's box AP 0.377, ...: accelbench list --tta); a loss such as llama3.1-8b-text's val_loss "
        "2.0 is reached at or below it",
        sweep=False,
    )
    second_target: float = opt(
        0.0,
        "target of the second metric of a workload scored on two, both to be reached (maskrcnn: mask AP, 0.339 "
        "beside box AP 0.377); 0: the workload's",
        sweep=False,
    )
    seeds: int = opt(3, "runs, each with its own seed; the score drops the fastest and the slowest", sweep=False)
    seed: int = opt(-1, "first seed (the others follow it); -1 draws them at random, as MLPerf does", sweep=False)
    max_epochs: int = opt(0, "epoch cap per run (0: the workload's); a run that hits it did not converge", sweep=False)
    data_dir: str = opt(
        "", "directory of the dataset in its standard format (not needed for digits)", sweep=False, metavar="DIR"
    )
    batch_size: int = opt(0, "per-device batch size (0: the recipe's)")
    precision: str = opt(
        "auto", "auto (the recipe's on a GPU, fp32 on a CPU), fp32, amp_fp16, amp_bf16", choices=TTA_PRECISIONS
    )
    compile: bool = opt(False, "torch.compile the model (compilation happens before the clock starts)", sweep=False)
    nproc: int = opt(1, "processes (devices), DDP under torchrun with the per-device batch")

    def validate(self) -> None:
        super().validate()
        r = recipe(self.workload)
        lo, hi = r.metric_range
        if self.target and not lo < self.target <= hi:
            raise UsageError(f"--target {self.target:g} is outside {r.metric}'s range ({lo:g}, {hi:g}]")
        if self.target < 0:
            raise UsageError(f"--target must be positive, got {self.target:g}")
        if self.second_target:
            if len(r.more_targets) != 1:
                raise UsageError(f"--second-target: {r.name} is scored on one metric, {r.metric}; use --target")
            [second] = r.more_targets
            if not lo < self.second_target <= hi:
                raise UsageError(f"--second-target {self.second_target:g} is outside {second}'s range ({lo:g}, {hi:g}]")
        positive("--seeds", self.seeds)
        positive("--nproc", self.nproc)
        self.validate_nodes()
        if self.max_epochs < 0 or self.batch_size < 0:
            raise UsageError("--max-epochs and --batch-size must not be negative")
        if self.data_dir and not r.needs_data_dir:  # silently unread, it would pass for the data trained on
            hint = r.data_hint.removeprefix("none: ")
            raise UsageError(f"{r.name} reads no --data-dir (it trains on {hint}): drop --data-dir")
        if r.needs_data_dir and not self.data_dir:
            raise UsageError(f"{r.name} reads its dataset from --data-dir DIR: {r.data_hint}")
        if self.data_dir and not Path(self.data_dir).expanduser().is_dir():
            raise UsageError(f"--data-dir {self.data_dir} is not a directory; {r.name} expects {r.data_hint}")
        if self.data_dir:
            r.check_data(Path(self.data_dir).expanduser())

    def check_environment(self, device_type: str) -> None:
        if self.nproc * self.nnodes > 1:
            check_nproc(self.nproc, device_type, self.nnodes)

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        words = [p["workload"], f"x{p['seeds']} seed" + ("s" if p["seeds"] != 1 else "")]
        if p.get("target"):
            words.append(f"to {p['target']:g}")
        if p.get("second_target"):  # which metric each target is: the recipe's names
            r = recipe(p["workload"])
            first, second = list(r.targets())
            named = f"to {first} {p.get('target') or r.target:g}"
            words[-1:] = [named] if p.get("target") else [words[-1], named]
            words.append(f"and {second} {p['second_target']:g}")
        if p.get("nproc", 1) * p.get("nnodes", 1) > 1:
            words.append(f"nproc={p['nproc'] * p.get('nnodes', 1)}")
        if p.get("precision", "auto") != "auto":
            words.append(p["precision"])
        if p.get("scale", "full") != "full":
            words.append(p["scale"])
        return " ".join(words)
