"""train --data real: a real input pipeline (ImageFolder, augmentation, DataLoader) measured beside synthetic data,
on tiny JPEG class folders made here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from train_fixtures import image_folders

from accelbench.errors import UsageError
from accelbench.results.record import schema_errors
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline

QUICK = {"model": "resnet18", "scale": "tiny", "warmup": 1, "num_batches": 6, "display_every": 2, "threads": 2}


def test_a_starved_loader_shows_as_input_bound(tmp_path: Path) -> None:
    """Large JPEGs decoded in the training process hold every step; small ones barely: the share says which."""
    small = image_folders(tmp_path / "small", size=(32, 32))
    large = image_folders(tmp_path / "large", size=(1600, 1200))
    # one thread: a team of two on cores that other work shares stalls at random, in either run
    base = {**QUICK, "data": "real", "batch_size": "4", "workers": 0, "threads": 1}
    # the two runs side by side, a pair at a time until one pair holds: other work on the host can stall either run
    # (a busy host's stall in the fed run reads as waiting for input); it never makes the small JPEGs the slow ones
    seen = []
    for _ in range(3):
        [fed] = run_inline(make_entry("train/throughput", {**base, "data_dir": str(small)}))
        [starved] = run_inline(make_entry("train/throughput", {**base, "data_dir": str(large)}))
        assert fed.status == starved.status == "ok", (fed.error, starved.error)
        fed_share, starved_share = fed.metrics["input_wait_share"].value, starved.metrics["input_wait_share"].value
        seen.append((fed_share, starved_share))
        if starved_share > 3 * fed_share and starved_share > 5:
            break
    else:
        raise AssertionError(f"no pair of runs told the starved loader apart (fed, starved shares in %): {seen}")


def test_data_only_times_the_pipeline_alone(tmp_path: Path) -> None:
    data = image_folders(tmp_path / "imgs")
    params = {**QUICK, "data": "real", "data_dir": str(data), "workers": 0, "batch_size": "4", "data_only": True}
    [r] = run_inline(make_entry("train/throughput", params))
    assert r.status == "ok", r.error
    assert r.details["data_only"] and r.metrics["throughput"].unit == "images/s"
    assert r.metrics["throughput"].value > 0 and "step_seconds" not in r.metrics


def test_bad_data_input_names_the_layout(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "noimages" / "a").mkdir(parents=True)
    for params, words in (
        ({"data": "real"}, "needs --data-dir"),
        (
            {"data": "real", "data_dir": str(tmp_path / "missing")},
            "does not exist.*image class folders.*CIFAR-10.*MNIST",
        ),
        ({"data": "real", "data_dir": str(empty)}, "no class folders"),
        ({"data": "real", "data_dir": str(tmp_path / "noimages")}, "hold no JPEG/PNG images"),
        ({"data": "real", "data_dir": str(empty), "model": "bert"}, "bert is measured on synthetic data"),
        ({"data": "real", "data_dir": str(empty), "model": "ncf"}, "lacks ratings.csv"),
        ({"data_only": True}, "--data-only times the real input pipeline"),
        ({"decode": "cuda"}, "--decode sets up the real input pipeline: add --data-dir"),
        ({"workers": 2}, "--workers sets up the real input pipeline: add --data-dir"),
        ({"data": "real", "data_dir": "CIFAR", "decode": "cuda"}, "--decode device decodes JPEG files.*cifar10"),
        ({"data": "real", "data_dir": "CIFAR", "decode": "device"}, "--decode device decodes JPEG files.*cifar10"),
        (
            {"data": "real", "data_dir": "IMAGES", "decode": "gpu"},
            "unknown decode .gpu.: choose one of auto, cpu, device, cuda; did you mean cuda",
        ),
    ):
        if params.get("data_dir") == "CIFAR":
            from tta_fixtures import write_cifar

            params["data_dir"] = str(write_cifar(tmp_path / f"cifar-{params['decode']}"))
        if params.get("data_dir") == "IMAGES":
            params["data_dir"] = str(image_folders(tmp_path / "imgs"))
        with pytest.raises(UsageError, match=words):
            make_entry("train/throughput", {**QUICK, **params})


def test_synthetic_and_real_side_by_side_from_the_command_line(tmp_path: Path, cli_env: dict[str, str]) -> None:
    data = image_folders(tmp_path / "imgs")
    args = ["train", "resnet18", "--scale", "tiny", "--data", "synthetic,real", "--data-dir", str(data)]
    args += ["--batch-size", "4", "--num-batches", "4", "--display-every", "2", "--warmup", "1", "--workers", "1"]
    out = run_cli(args, cli_env, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "synthetic against real data" in out.stdout and "real / synthetic" in out.stdout
    [real] = [
        r
        for r in json.loads(run_cli(["results", "list", "--json"], cli_env, tmp_path).stdout)
        if r["params"]["data"] == "real"
    ]
    assert real["params"]["workers"] == 1 and real["status"] == "ok"
    pipeline = real["details"]["pipeline"]
    assert pipeline["images"] == 24 and pipeline["classes"] == 3 and pipeline["workers"] == 1
    assert "RandomResizedCrop(64)" in pipeline["augmentation"] and pipeline["decode"].startswith("PIL")
    assert len(real["details"]["input_wait_seconds_per_window"]) == 2  # 4 steps in windows of 2
    assert 0 <= real["metrics"]["input_wait_share"]["value"] <= 100
    assert schema_errors(real) == []
    # a data directory alone means real data
    only = run_cli(["train", "resnet18", "--data-dir", str(tmp_path / "nothing")], cli_env, tmp_path)
    assert only.returncode == 2 and "does not exist" in only.stderr
    gpu = run_cli(
        ["train", "resnet18", "--data-dir", str(data), "--decode", "cuda", "--device", "cpu"], cli_env, tmp_path
    )
    assert gpu.returncode == 2 and "--decode device decodes JPEGs on the GPU" in gpu.stderr


@pytest.mark.parametrize("fmt", ["cifar10", "mnist", "movielens"])
def test_the_formats_tta_reads_feed_training_too(fmt: str, tmp_path: Path) -> None:
    from tta_fixtures import write_cifar, write_mnist, write_ratings

    root = {"cifar10": write_cifar, "mnist": write_mnist, "movielens": write_ratings}[fmt](tmp_path / fmt)
    model = "ncf" if fmt == "movielens" else "resnet18"
    batch = "64" if fmt == "movielens" else "4"
    params = {**QUICK, "model": model, "data": "real", "data_dir": str(root), "workers": 0, "batch_size": batch}
    [r] = run_inline(make_entry("train/throughput", params))
    assert r.status == "ok", r.error
    setup = r.details["pipeline"]
    assert setup["format"].startswith({"cifar10": "CIFAR-10", "mnist": "MNIST", "movielens": "MovieLens"}[fmt])
    assert setup["decode"].startswith("none") and "input_wait_share" in r.metrics


def test_the_device_decoder_matches_the_cpu_pipeline(tmp_path: Path) -> None:
    """--decode cuda's batch step (decode all JPEGs in one call, crop, flip, normalize) run on the CPU here: the
    same shapes, labels and value range as the PIL path, PNGs decoded by the workers alongside."""
    import torch
    from PIL import Image
    from torchvision.io import decode_jpeg

    from accelbench.train.data import _image_folder, _loader
    from accelbench.train.decode import DeviceAugment, collate, encoded_folder

    root = image_folders(tmp_path / "imgs", classes=3, per_class=4, size=(60, 44))
    Image.fromarray(np.full((30, 50, 3), 200, dtype=np.uint8)).save(root / "class2" / "flat.png")
    data, names = encoded_folder(root, classes=2, is_valid=lambda p: p.endswith((".jpg", ".png")))
    reference, _ = _image_folder(str(root), size=32, classes=2)
    assert names == reference.classes and len(data) == len(reference) == 13
    assert [y % 2 for _, y in reference.samples] == [data[i][1] for i in range(len(data))]  # labels folded alike
    assert data[0][0].dim() == 1 and decode_jpeg(data[0][0]).shape == (3, 44, 60) and data[0][2]  # bytes, decodable
    png = [i for i, (p, _) in enumerate(data.samples) if p.endswith(".png")][0]
    assert not data[png][2]  # decoded on the CPU by the feeder

    device = torch.device("cpu")
    pipeline = _loader(data, {}, batch=13, workers=2, device=device, rank=0, world=1, collate_fn=collate)
    pipeline.finish = DeviceAugment(device, size=32)
    images, labels = pipeline.feeder(device, lambda b: b)()
    assert images.shape == (13, 3, 32, 32) and images.dtype == torch.float32
    assert sorted(labels.tolist()) == sorted(data[i][1] for i in range(13))
    cpu_images = torch.stack([reference[i][0] for i in range(13)])
    # normalized pixels of random JPEGs: both paths centre near the same mean and spread over the same range
    assert abs(images.mean() - cpu_images.mean()) < 0.25 and abs(images.std() - cpu_images.std()) < 0.25
    assert images.min() >= -2.2 and images.max() <= 2.7  # (0 - mean) / std and (1 - mean) / std bound them
    flat = images[sorted(labels.tolist()).index(0)]  # any image: finite everywhere
    assert torch.isfinite(flat).all() and pipeline.waited > 0


def test_decoder_resolution_says_why_auto_stayed_on_the_cpu() -> None:
    import torch

    from accelbench.errors import BenchmarkSkipped
    from accelbench.train.decode import resolve

    assert resolve("auto", torch.device("cpu")) == ("cpu", None)
    assert resolve("cpu", torch.device("cuda")) == ("cpu", None)
    if not torch.cuda.is_available():
        decoder, why = resolve("auto", torch.device("cuda"))
        assert decoder == "cpu" and why
        with pytest.raises(BenchmarkSkipped, match="--decode device"):
            resolve("device", torch.device("cuda"))
        with pytest.raises(BenchmarkSkipped, match="--decode device"):
            resolve("cuda", torch.device("cuda"))  # the option's first name


def test_an_unreadable_image_fails_in_one_line_naming_the_file(tmp_path: Path) -> None:
    data = image_folders(tmp_path / "imgs")
    broken = next(data.rglob("*.jpg"))
    broken.write_bytes(b"")  # a 0-byte JPEG: PIL cannot identify it
    params = {**QUICK, "data": "real", "data_dir": str(data), "workers": 1, "batch_size": "4"}
    [r] = run_inline(make_entry("train/throughput", params))
    assert r.status == "failed" and "\n" not in r.error
    assert "cannot identify image file" in r.error and broken.name in r.error and "DataLoader worker" in r.error
