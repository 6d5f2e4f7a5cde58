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
