"""Time to mAP: SSD on a COCO-format folder, scored by pycocotools' COCOeval, to a target over 3 seeds.

The data is a toy COCO written in COCO 2017's layout (tta_fixtures.write_coco_toy: coloured rectangles whose
colour is their category, with COCO's sparse category ids); the tiny SSD learns it in a few epochs.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from tta_fixtures import write_coco_toy

from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, make_entry

TTA = "tta/time_to_target"


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    return write_coco_toy(tmp_path_factory.mktemp("coco"))


def test_a_tiny_ssd_reaches_its_map_target_over_three_seeds(coco, tmp_path, store, profile):
    params = {"workload": "ssd", "scale": "tiny", "data_dir": str(coco), "target": 0.25, "seeds": 3, "seed": 1}
    suite = Suite("t", [make_entry(TTA, params | {"threads": 2, "max_epochs": 12})])
    [r] = run_suite(suite, store, RunOptions(out_dir=tmp_path), None, profile=profile).results
    assert r.status == "ok", r.error or r.reason
    assert r.valid, r.details
    seeds = r.details["seeds"]
    assert len(seeds) == 3 and all(s["converged"] and 0.25 <= s["final_quality"] <= 1.0 for s in seeds)

    from mlperf_logging.compliance_checker import mlp_parser

    for path in r.details["mlperf_logs"]:
        lines, errors = mlp_parser.parse_file(path, ruleset="4.0.0")
        assert not errors
        keys = [ll.key for ll in lines]
        assert lines[keys.index("submission_benchmark")].value["value"] == "ssd"
        assert lines[keys.index("eval_samples")].value["value"] == 32


def test_map_is_cocoevals_and_falls_with_a_wrong_box_or_class(coco):
    """Detections equal to the ground truth score 1.0 through COCOeval; boxes shifted by half their width and
    the right boxes with the wrong category score lower; sparse category ids map back exactly."""
    import torch

    from accelbench.datasets.coco import coco_eval, read_split, to_results

    train = read_split(coco, "train2017")
    val = read_split(coco, "val2017", categories=list(train.label_of))
    assert train.label_of == {1: 1, 3: 2, 7: 3} and val.category_of == {1: 1, 2: 3, 3: 7}

    def outputs(shift: float = 0.0, relabel: bool = False) -> list[dict]:
        out = []
        for image_id in val.image_ids:
            anns = val.coco.imgToAnns[image_id]
            boxes = torch.tensor([[a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3]]
                                  for a in anns], dtype=torch.float32)  # fmt: skip
            boxes[:, [0, 2]] += shift * (boxes[:, 2] - boxes[:, 0]).unsqueeze(1)
            labels = torch.tensor([val.label_of[a["category_id"]] for a in anns])
            if relabel:
                labels = labels % 3 + 1
            out.append({"boxes": boxes, "scores": torch.ones(len(anns)), "labels": labels})
        return out

    perfect = coco_eval(val, to_results(val, val.image_ids, outputs(), 64))
    shifted = coco_eval(val, to_results(val, val.image_ids, outputs(shift=0.5), 64))
    wrong = coco_eval(val, to_results(val, val.image_ids, outputs(relabel=True), 64))
    assert perfect == pytest.approx(1.0) and shifted < 0.2 and wrong == 0.0
    assert coco_eval(val, []) == 0.0


def test_a_coco_folder_without_its_annotations_is_one_line_and_exit_2(tmp_path, cli_env):
    (tmp_path / "train2017").mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "accelbench", "tta", "ssd", "--scale", "tiny", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr
    assert "lacks annotations/instances_train2017.json" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # three seeds of a Mask R-CNN, about 45 s on 2 cores
def test_a_tiny_maskrcnn_reaches_both_ap_targets_over_three_seeds(coco, tmp_path, store, profile):
    params = {"workload": "maskrcnn", "scale": "tiny", "data_dir": str(coco), "seeds": 3, "seed": 1}
    params |= {"target": 0.3, "second_target": 0.3, "threads": 2, "max_epochs": 10}
    suite = Suite("t", [make_entry(TTA, params)])
    [r] = run_suite(suite, store, RunOptions(out_dir=tmp_path), None, profile=profile).results
    assert r.status == "ok", r.error or r.reason
    assert r.valid, r.details
    assert r.details["metric"] == "box_map" and r.details["more_targets"] == {"mask_map": 0.3}
    for s in r.details["seeds"]:  # the run stops at the first evaluation where both are reached, not before
        assert s["converged"] and s["curve"][-1]["quality"] >= 0.3 and s["curve"][-1]["mask_map"] >= 0.3
        assert all(p["quality"] < 0.3 or p["mask_map"] < 0.3 for p in s["curve"][:-1])

    from mlperf_logging.compliance_checker import mlp_parser

    lines, errors = mlp_parser.parse_file(r.details["mlperf_logs"][0], ruleset="4.0.0")
    assert not errors
    accuracy = [ll.value["value"] for ll in lines if ll.key == "eval_accuracy"]
    assert set(accuracy[-1]) == {"BBOX", "SEGM"} and min(accuracy[-1].values()) >= 0.3  # as MLPerf's Mask R-CNN logs
    assert next(ll.value["value"] for ll in lines if ll.key == "submission_benchmark") == "maskrcnn"


def test_mask_ap_is_cocoevals_segm_and_is_scored_apart_from_the_boxes(coco):
    """Mask R-CNN's combine scores boxes and masks separately through COCOeval: the true masks with shifted boxes
    keep mask AP at 1.0 while box AP falls; the true boxes with masks shifted by half an object fall in mask AP."""
    import torch

    from accelbench.datasets.coco import load_images, to_results
    from accelbench.tta.recipes.detection import MaskRcnn

    r = MaskRcnn()
    _, val = r.load(coco, "tiny")
    _, targets = load_images(val, val.image_ids, None, masks=True)

    def part(box_shift: int = 0, mask_shift: int = 0) -> list[dict]:
        outputs = []
        for t in targets:
            boxes = t["boxes"].clone()
            boxes[:, [0, 2]] += box_shift * (boxes[:, 2] - boxes[:, 0]).unsqueeze(1) / 2
            masks = torch.roll(t["masks"], shifts=mask_shift * 8, dims=-1).float()[:, None]
            outputs.append({"boxes": boxes, "labels": t["labels"], "scores": torch.ones(len(boxes)), "masks": masks})
        return to_results(val, val.image_ids, outputs, None)

    exact = r.combine([part()])
    assert exact["box_map"] == pytest.approx(1.0) and exact["mask_map"] == pytest.approx(1.0)
    boxes_off = r.combine([part(box_shift=1)])
    assert boxes_off["box_map"] < 0.3 and boxes_off["mask_map"] == pytest.approx(1.0)
    masks_off = r.combine([part(mask_shift=1)])
    assert masks_off["box_map"] == pytest.approx(1.0) and masks_off["mask_map"] < 0.5
    halves = r.combine([part()[::2], part()[1::2]])  # two ranks' detections scored together
    assert halves == exact


def test_two_targets_are_reached_only_together():
    from accelbench.tta.loop import all_reached
    from accelbench.tta.recipes.detection import MaskRcnn

    r = MaskRcnn()
    goals = r.targets(0.3, 0.25)
    assert goals == {"box_map": 0.3, "mask_map": 0.25} and r.targets() == {"box_map": 0.377, "mask_map": 0.339}
    assert all_reached(r, {"box_map": 0.31, "mask_map": 0.25}, goals)
    assert not all_reached(r, {"box_map": 0.31, "mask_map": 0.24}, goals)
    assert not all_reached(r, {"box_map": 0.29, "mask_map": 0.9}, goals)


def test_flipped_masks_stay_on_their_objects(coco):
    """A flipped image's masks are flipped with it: every mask pixel lies on the object's colour, not the grey."""
    import torch

    from accelbench.tta.recipes.detection import MaskRcnn

    r = MaskRcnn()
    train, _ = r.load(coco, "tiny")
    images, targets = next(iter(r.batches(train, 32, 1, 0, 0, 1, torch.device("cpu"))))
    for image, target in zip(images, targets, strict=True):
        grey = (image - 128 / 255).abs().amax(0) < 0.05
        for m in target["masks"].bool():
            assert (grey & m).float().sum() <= 0.1 * m.sum()  # jpeg's edges aside


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["ssd", "--second-target", "0.2"], "ssd is scored on one metric, map; use --target"),
        (["maskrcnn", "--second-target", "1.5"], "--second-target 1.5 is outside mask_map's range (0, 1]"),
    ],
)
def test_a_second_target_is_checked_in_one_line(args, said, coco, tmp_path, cli_env):
    out = subprocess.run(
        [sys.executable, "-m", "accelbench", "tta", *args, "--scale", "tiny", "--data-dir", str(coco)],
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr
    assert said in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # torchrun: two ranks detect half the images each; both ranks' masks scored together
def test_two_ranks_reach_both_targets_with_the_evaluation_sharded(coco, tmp_path, store, profile):
    params = {"workload": "maskrcnn", "scale": "tiny", "data_dir": str(coco), "seeds": 1, "seed": 1}
    params |= {"target": 0.3, "second_target": 0.3, "threads": 1, "max_epochs": 12, "nproc": 2}
    [r] = run_suite(
        Suite("t", [make_entry(TTA, params)]), store, RunOptions(out_dir=tmp_path), None, profile=profile
    ).results
    assert r.status == "ok", r.error or r.reason
    [seed] = r.details["seeds"]
    assert seed["converged"] and seed["curve"][-1]["mask_map"] >= 0.3 and r.details["more_targets"] == {"mask_map": 0.3}


def test_loader_workers_decode_the_same_batches_as_the_training_process(coco, monkeypatch):
    """Full COCO is decoded by DataLoader workers (a GPU would wait on JPEG decoding otherwise); the batches, their
    order and their flips are those the training process decodes alone, and a rank's share is its own. The
    workers persist from epoch to epoch (one loader, the same processes) while each epoch's order changes."""
    import torch

    from accelbench.tta.recipes.detection import MaskRcnn

    monkeypatch.setattr("accelbench.system.cpu.usable_cores", lambda: 2)  # one worker, on any host

    def recipe(workers_from: int) -> tuple[MaskRcnn, object]:
        r = MaskRcnn()
        r.workers_from = workers_from
        train, _ = r.load(coco, "tiny")
        return r, train

    def epoch(r: MaskRcnn, train: object, number: int, rank: int = 0, world: int = 1) -> list:
        return list(r.batches(train, 8, number, 5, rank, world, torch.device("cpu")))

    def same(a: list, b: list) -> bool:
        return len(a) == len(b) and all(
            all(torch.equal(x, y) for x, y in zip(ia, ib, strict=True))
            and all(torch.equal(x[k], y[k]) for x, y in zip(ta, tb, strict=True) for k in ("boxes", "labels", "masks"))
            for (ia, ta), (ib, tb) in zip(a, b, strict=True)
        )

    alone, parallel = recipe(10**6), recipe(0)
    third = epoch(*parallel, 3)
    [loader] = [held for _, held in parallel[0].kept._held.values()]
    workers = [w.pid for w in loader._iterator._workers]
    assert len(third) == 32 and loader.num_workers >= 1 and workers
    assert same(epoch(*alone, 3), third)
    fourth = epoch(*parallel, 4)
    assert same(epoch(*alone, 4), fourth) and not same(third, fourth)
    assert [held for _, held in parallel[0].kept._held.values()] == [loader]
    assert [w.pid for w in loader._iterator._workers] == workers  # the same processes: started once
    first, second = epoch(*alone, 3, 0, 2), epoch(*alone, 3, 1, 2)
    assert len(first) == len(second) == 16
    assert not torch.equal(first[0][0][0], second[0][0][0])


def test_the_report_draws_each_metric_a_run_had_to_reach_with_its_own_target():
    """A Mask R-CNN record is judged on box and mask AP together: the report draws both curves, each against its
    own target, and says they are reached together; a one-metric record keeps one chart."""
    from accelbench.report.common import ReportInput
    from accelbench.report.model import Chart, Table
    from accelbench.report.tta import tta
    from accelbench.results.record import Metric, Result

    def record(workload: str, more: dict) -> Result:
        curve = [{"epoch": e, "seconds": 3.0 * e, "quality": 0.1 * e, "samples": 256 * e} for e in (1, 2, 3, 4)]
        for p in curve:
            p |= {name: 0.12 * p["epoch"] for name in more}
        return Result(
            "tta/time_to_target",
            {"workload": workload, "scale": "tiny", "seeds": 1},
            metrics={"time_to_target_seconds": Metric(value=12.0, unit="s", higher_is_better=False)},
            primary_metric="time_to_target_seconds",
            valid=True,
            details={"metric": "box_map" if more else "map", "target": 0.3, "more_targets": more,
                     "seeds": [{"seed": 1, "converged": True, "curve": curve}], "score": {"converged": 1, "runs": 1}},
            system={"fingerprint": "f00d", "profile": {}},
        )  # fmt: skip

    charts = [b for b in tta(ReportInput([record("maskrcnn", {"mask_map": 0.4})])).blocks if isinstance(b, Chart)]
    assert [c.alt.split(" against")[0] for c in charts] == ["box_map", "mask_map"]
    assert "target 0.3 (reached together: box_map 0.3, mask_map 0.4)" in charts[0].alt
    assert "target 0.4 (reached together" in charts[1].alt
    [one] = [b for b in tta(ReportInput([record("ssd", {})])).blocks if isinstance(b, Chart)]
    assert one.alt.endswith("target 0.3")

    # two runs of one workload: each row says its run, and the one chart the (newest) run it draws
    old, new = record("ssd", {}), record("ssd", {})
    old.run_id, new.run_id = "20261101-000000-aaaa", "20261102-000000-bbbb"
    old.started_at, new.started_at = "2026-11-01T00:00:00", "2026-11-02T00:00:00"
    blocks = tta(ReportInput([old, new])).blocks
    [table] = [b for b in blocks if isinstance(b, Table)]
    [chart] = [b for b in blocks if isinstance(b, Chart)]
    assert table.columns[0] == "run" and [row[0] for row in table.rows] == [new.run_id, old.run_id]
    assert chart.title.endswith(f"run {new.run_id}")


def test_a_train_split_smaller_than_one_global_batch_says_to_lower_the_batch(tmp_path):
    """Every rank takes whole batches (an empty one would leave its detector nothing to train and the ranks out of
    step), so fewer images than one global batch is a message, not an IndexError."""
    from accelbench.errors import UsageError
    from accelbench.tta.recipes.detection import Ssd

    r = Ssd()
    train, _ = r.load(write_coco_toy(tmp_path / "small", train=10, val=4), "tiny")
    assert r.steps_per_epoch(train, 8) == 1
    with pytest.raises(UsageError, match="train2017 has 10 images with an object, fewer than one global batch of 16"):
        r.steps_per_epoch(train, 16)


def test_the_full_scale_ssd_is_mlperfs_resnet34_ssd300():
    """Six heads on 38, 19, 10, 5, 3 and 1 cell maps of 256, 512, 512, 256, 256 and 256 channels, 8,732 default
    boxes, about 20 M parameters; a training step returns SSD's two losses."""
    import torch
    from torchvision.models.detection.image_list import ImageList

    from accelbench.workloads.detection import ssd300_resnet34

    model = ssd300_resnet34(81)
    maps = list(model.backbone(torch.rand(1, 3, 300, 300)).values())
    assert [tuple(m.shape[1:]) for m in maps] == [(256, 38, 38), (512, 19, 19), (512, 10, 10), (256, 5, 5),
                                                  (256, 3, 3), (256, 1, 1)]  # fmt: skip
    assert model.anchor_generator(ImageList(torch.rand(1, 3, 300, 300), [(300, 300)]), maps)[0].shape == (8732, 4)
    assert 19e6 < sum(p.numel() for p in model.parameters()) < 21e6
    target = [{"boxes": torch.tensor([[10.0, 20.0, 100.0, 150.0]]), "labels": torch.tensor([3])}]
    assert set(model([torch.rand(3, 300, 300)], target)) == {"bbox_regression", "classification"}
