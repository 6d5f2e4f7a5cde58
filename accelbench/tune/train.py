"""``tune MODEL --task train``: training throughput (``train/throughput``) over precision, memory format and
torch.compile, then batch sizes around the best, each trial a short training run whose windows are its samples.
Training changes no answer the way a served precision does, so nothing is gated. A decoder's ``train/llm`` space
(sharding, micro-batch, checkpointing) is not searched yet: :class:`LLMTrainTask` says so."""

from __future__ import annotations

from typing import Any, Callable

from accelbench.errors import UsageError
from accelbench.train.llm.specs import LLMTrainParams
from accelbench.train.specs import TRAIN_PRECISIONS, TrainParams
from accelbench.tune.candidate import Candidate, Space, split_list
from accelbench.tune.task import TuneTask, batch_class, compile_modes, device_of, ordered, trial_base

#: training's defaults: the candidate every other is measured against
TRAIN_DEFAULT = {"precision": "fp32", "channels_last": False, "compile": False, "batch_size": "default"}
#: training steps (warm-up, measured, per window) of a screening and of a confirmation trial
TRAIN_SCREEN = {"warmup": 2, "num_batches": 6, "display_every": 2}
TRAIN_CONFIRM = {"warmup": 3, "num_batches": 18, "display_every": 2}


class TrainTask(TuneTask):
    """The search of ``train/throughput``'s settings: samples/s, no gate."""

    name = "train/throughput"
    command = "train"
    params = TrainParams
    gated = False

    def precisions(self) -> tuple[str, ...]:
        return TRAIN_PRECISIONS

    def default(self) -> Candidate:
        return Candidate(dict(TRAIN_DEFAULT))

    def runtimes(self) -> Space:
        from accelbench.devices.precision import precision_reason
        from accelbench.workloads import model_info

        tune, device = self.tune, device_of(self.tune)
        image = model_info(tune.model).image_input
        wanted = split_list(tune.precisions)
        space = Space([], [])
        for precision in TRAIN_PRECISIONS:
            if wanted and precision not in wanted:
                continue
            why = None if precision == "fp32" else precision_reason(device, precision, tune.emulated)
            modes = [None, *compile_modes(device)] if tune.compile else [None]
            for mode in modes:
                for cl in (False, True) if image else (False,):
                    c = Candidate(
                        TRAIN_DEFAULT | {"precision": precision, "channels_last": cl, "compile": mode is not None}
                    )
                    c = c.with_(compile_mode=mode) if mode else c
                    (space.left_out.append((c, why)) if why else space.candidates.append(c))
        return ordered(space, self.default(), lambda c: bool(c.settings["compile"]))

    def batches(self, device: Any) -> list[str]:
        """``--batch-sizes``, else half and twice the model's default batch for the device's class; the default
        itself is the "default" already screened."""
        from accelbench.workloads import model_info

        given = [int(b) for b in split_list(self.tune.batch_sizes)]
        base = model_info(self.tune.model).default_batch.get(batch_class(device), 32)
        sizes = given or [max(1, base // 2), base * 2]
        return [str(b) for b in sizes if b != base]

    def shapes(self, best: list[Candidate]) -> list[Candidate]:
        device = device_of(self.tune)
        return [c.with_(batch_size=b) for c in best for b in self.batches(device)]

    def trial(self, **settings: Any) -> TrainParams:
        return TrainParams(**(trial_base(self.tune) | settings))

    def trial_of(self, phase: str, settings: dict[str, Any]) -> TrainParams:
        return self.trial(**settings, **(TRAIN_CONFIRM if phase == "confirm" else TRAIN_SCREEN))

    def first_expected(self, phase: str, per_sample: Callable[[], float | None]) -> tuple[float, float] | None:
        """A training confirmation runs three times a screening's steps."""
        return (2.0, 0.0) if phase == "confirm" else None

    def gate_words(self) -> str:
        return "none: training throughput has no accuracy gate"

    def ungated_words(self) -> str:
        return "not gated (training throughput)"


class LLMTrainTask(TuneTask):
    """``train/llm``: a decoder's training, whose settings are not searched yet (said before anything runs)."""

    name = "train/llm"
    command = "train"
    params = LLMTrainParams
    gated = False

    def check(self) -> None:
        model = self.tune.model
        raise UsageError(
            f"--task train searches train/throughput's settings; {model} trains as train/llm, whose settings "
            f"(sharding, micro-batch, checkpointing) are not searched yet: measure them with accelbench train "
            f"{model} and compare"
        )

    def precisions(self) -> tuple[str, ...]:
        return TRAIN_PRECISIONS
