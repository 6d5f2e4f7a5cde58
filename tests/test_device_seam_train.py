"""Training, time-to-accuracy and tuning ask the device's kind, never its type: a fake accelerator kind (its
tensors on torch's ``meta`` device) gets the GPU's batch sizes, precisions, compile modes, pinned copies and
decoder choice; CPU and CUDA keep their figures; ``--decode cuda`` still means the on-device decoder."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from accelbench.devices.kind import DeviceKind, register, unregister
from accelbench.errors import BenchmarkSkipped, UsageError


class FakeGpu(DeviceKind):
    """An accelerator of its own (as a vendor's module would declare it), answering for ``meta`` devices."""

    name = "fakegpu"
    torch_type = "meta"
    vendor = "Test Vendor"
    accelerator = True
    batch_class = "gpu"
    pin_memory = True
    graphs = True


@pytest.fixture
def fake_gpu() -> Iterator[torch.device]:
    register(FakeGpu())
    try:
        yield torch.device("meta")
    finally:
        unregister("fakegpu")


CPU, CUDA = torch.device("cpu"), torch.device("cuda")


# -- batch classes -----------------------------------------------------------------------------------------


def test_a_published_batch_is_looked_up_by_the_devices_class(fake_gpu: torch.device) -> None:
    from accelbench.workloads import model_info

    info = model_info("resnet50")
    gpu, cpu = info.default_batch["gpu"], info.default_batch["cpu"]
    assert set(info.default_batch) == {"gpu", "cpu"} and gpu != cpu
    assert info.batch_for(fake_gpu) == info.batch_for("meta") == info.batch_for("gpu") == gpu
    assert info.batch_for(CUDA) == info.batch_for("cuda") == gpu  # CUDA's figure is the GPU class's, as before
    assert info.batch_for(CPU) == info.batch_for("cpu") == cpu


def test_a_batch_table_keyed_by_the_old_cuda_name_still_reads() -> None:
    from accelbench.workloads.base import ModelInfo

    old = ModelInfo("mine", "tabular", "rows", "(batch, 8)", default_batch={"cpu": 2, "cuda": 7})
    assert old.default_batch == {"cpu": 2, "gpu": 7} and old.batch_for("cuda") == old.batch_for("gpu") == 7
    both = ModelInfo("mine", "tabular", "rows", "(batch, 8)", default_batch={"cuda": 7, "gpu": 9})
    assert both.default_batch == {"gpu": 9} and both.batch_for("cpu") == 9  # no cpu class: the GPU's, as before
    assert ModelInfo("mine", "tabular", "rows", "(batch, 8)", default_batch={}).batch_for("cpu") == 32


def test_every_shipped_batch_table_is_keyed_by_class() -> None:
    from accelbench.tta.recipes import RECIPES, recipe
    from accelbench.workloads import MODELS, model_info

    for name in MODELS:
        assert set(model_info(name).default_batch) <= {"gpu", "cpu"}, name
    for name in RECIPES:
        assert set(recipe(name).batch_size) == {"gpu", "cpu"}, name


def test_a_recipes_batch_follows_the_devices_class(fake_gpu: torch.device) -> None:
    from accelbench.tta.recipes import recipe
    from accelbench.tta.run import _recipe_batch

    table = recipe("imagenet").batch_size
    assert _recipe_batch(table, fake_gpu) == _recipe_batch(table, CUDA) == table["gpu"] == 256
    assert _recipe_batch(table, CPU) == table["cpu"] == 32
    assert _recipe_batch({"cuda": 128}, CPU) == 128 and _recipe_batch({}, CUDA) == 64


def test_tune_tries_the_gpu_classes_batches_and_graph_mode_where_the_kind_has_them(fake_gpu: torch.device) -> None:
    from accelbench.tune.space import INFER_BATCHES, _batches, _compile_modes
    from accelbench.tune.specs import TuneParams
    from accelbench.workloads import model_info

    assert _compile_modes(fake_gpu) == _compile_modes(CUDA) == ("default", "reduce-overhead")
    assert _compile_modes(CPU) == ("default",)
    infer = TuneParams(model="resnet50", task="infer")
    assert _batches(infer, None, fake_gpu) == _batches(infer, None, CUDA) == list(INFER_BATCHES["gpu"])
    assert _batches(infer, None, CPU) == [16, 32]
    train = TuneParams(model="resnet50", task="train")
    base = model_info("resnet50").default_batch
    assert _batches(train, None, fake_gpu) == [str(base["gpu"] // 2), str(base["gpu"] * 2)]
    assert _batches(train, None, CPU) == [str(base["cpu"] // 2), str(base["cpu"] * 2)]


# -- precision -------------------------------------------------------------------------------------------


def test_time_to_accuracy_trains_in_the_recipes_precision_on_any_accelerator(fake_gpu: torch.device) -> None:
    from accelbench.tta.loop import precision_of
    from accelbench.tta.recipes import recipe
    from accelbench.tta.specs import TtaParams

    auto = TtaParams(workload="digits")
    assert precision_of(auto, recipe("imagenet"), fake_gpu) == "amp_bf16"
    assert precision_of(auto, recipe("imagenet"), CPU) == "fp32"


def test_train_refuses_tf32_where_the_kind_has_none(fake_gpu: torch.device) -> None:
    from accelbench.train.specs import TrainParams

    with pytest.raises(UsageError, match="tf32: the fakegpu device cannot run it .*NVIDIA Tensor Core mode"):
        TrainParams(precision="tf32").check_environment("meta")
    with pytest.raises(UsageError, match="the cpu device cannot run it"):
        TrainParams(precision="tf32").check_environment("cpu")
    TrainParams(precision="amp_bf16").check_environment("meta")


# -- the input pipeline ----------------------------------------------------------------------------------


def test_decode_cuda_is_read_as_device(tmp_path: Path) -> None:
    from train_fixtures import image_folders

    from accelbench.suite.suites import make_entry
    from accelbench.train.specs import TrainParams

    assert TrainParams(decode="cuda").decode == "device" and TrainParams(decode="cpu").decode == "cpu"
    data = str(image_folders(tmp_path / "imgs"))
    base = {"model": "resnet18", "scale": "tiny", "data": "real", "data_dir": data}
    for given in ("cuda", "device"):
        assert make_entry("train/throughput", base | {"decode": given}).params["decode"] == "device"
    assert TrainParams.describe(TrainParams(**base, decode="cuda").to_dict()).endswith("decoded on device tiny")


def test_the_device_decoder_is_the_kinds_to_offer(fake_gpu: torch.device) -> None:
    from accelbench.train.decode import resolve
    from accelbench.train.specs import TrainParams

    assert resolve("auto", fake_gpu) == ("cpu", None)  # the kind decodes no JPEG: auto stays on the CPU
    for name in ("device", "cuda"):
        with pytest.raises(BenchmarkSkipped, match="--decode device: .*not on the fakegpu device"):
            resolve(name, fake_gpu)
        with pytest.raises(UsageError, match="--decode device decodes JPEGs on the GPU.*on the fakegpu device"):
            TrainParams(data="real", data_dir="x", decode=name).check_environment("meta")


class _Batch:
    """A tensor stand-in that records how it was copied."""

    def __init__(self) -> None:
        self.copies: list[Any] = []

    def to(self, device: torch.device, non_blocking: bool = False) -> "_Batch":
        self.copies.append((device, non_blocking))
        return self


def test_pinned_non_blocking_copies_where_the_kind_pins(fake_gpu: torch.device) -> None:
    from accelbench.train.data import Pipeline, _loader

    for device, pinned in ((fake_gpu, True), (CUDA, True), (CPU, False)):
        x = _Batch()
        Pipeline(loader=[(x,)], setup={}).feeder(device, lambda b: b)()
        assert x.copies == [(device, pinned)]
        setup = _loader(list(range(4)), {}, 2, 0, device, 0, 1).setup
        assert setup["pin_memory"] is setup["non_blocking_copy"] is pinned


def test_a_ddp_rank_names_the_accelerator_device_it_owns(fake_gpu: torch.device) -> None:
    from accelbench.train.ddp_rank import device_ids

    assert device_ids(torch.device("cuda", 3)) == [3] and device_ids(torch.device("meta", 1)) == [1]
    assert device_ids(CPU) is None and device_ids(fake_gpu) is None  # host memory, no index: DDP wants None


def test_an_old_record_s_cuda_decoder_reads_as_the_device_decoder() -> None:
    """Records written before the seam said ``decode: cuda``; they still pair with today's ``decode: device``."""
    from accelbench.results.record import SCHEMA_VERSION
    from accelbench.results.upgrade import upgrade

    old = {"schema_version": SCHEMA_VERSION, "benchmark": "train/throughput", "params": {"decode": "cuda"}}
    assert upgrade(old, SCHEMA_VERSION)["params"]["decode"] == "device" and old["params"]["decode"] == "cuda"
    other = {"schema_version": SCHEMA_VERSION, "benchmark": "infer/loadgen", "params": {"device": "cuda"}}
    assert upgrade(other, SCHEMA_VERSION) is other
