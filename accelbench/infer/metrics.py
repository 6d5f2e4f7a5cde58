"""Quality metrics of served models that need more than a line: COCO mAP, word error rate."""

from __future__ import annotations

from typing import Any

import numpy as np

#: COCO's IoU thresholds 0.50:0.05:0.95 and its 101-point recall grid
IOUS = np.linspace(0.5, 0.95, 10)
RECALLS = np.linspace(0.0, 1.0, 101)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` (N, 4) with every box in ``b`` (M, 4), corners x1 y1 x2 y2."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(axis=2)
    area_a = (a[:, 2:] - a[:, :2]).clip(0).prod(axis=1)
    area_b = (b[:, 2:] - b[:, :2]).clip(0).prod(axis=1)
    iou: np.ndarray = inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-12)
    return iou


def coco_map(detections: list[np.ndarray], truths: list[np.ndarray]) -> float:
    """COCO-style mAP: AP over 101 recall points, averaged over IoU 0.50:0.95 and over the classes present.

    ``detections[i]`` is image i's (K, 6) rows x1 y1 x2 y2 score label; ``truths[i]`` its (G, 5) rows
    x1 y1 x2 y2 label. Each detection, best score first, matches the unmatched ground truth of its class
    with the highest IoU at or above the threshold (crowd regions and area ranges are not modelled).
    """
    dets = [np.asarray(d, dtype=np.float64).reshape(-1, 6) for d in detections]
    gts = [np.asarray(g, dtype=np.float64).reshape(-1, 5) for g in truths]
    classes = sorted({int(c) for g in gts for c in g[:, 4]})
    aps = []
    for cls in classes:
        for thr in IOUS:
            scores, hits, total = [], [], 0
            for d, g in zip(dets, gts, strict=True):
                d, g = d[d[:, 5] == cls], g[g[:, 4] == cls]
                total += len(g)
                d = d[np.argsort(-d[:, 4], kind="stable")]
                taken = np.zeros(len(g), dtype=bool)
                iou = box_iou(d[:, :4], g[:, :4]) if len(d) and len(g) else np.zeros((len(d), len(g)))
                for k in range(len(d)):
                    candidates: np.ndarray | list[int] = np.where(~taken & (iou[k] >= thr))[0] if len(g) else []
                    hit = len(candidates) > 0
                    if hit:
                        best = candidates[np.argmax(iou[k, candidates])]
                        taken[best] = True
                    scores.append(d[k, 4])
                    hits.append(hit)
            aps.append(_average_precision(np.asarray(scores), np.asarray(hits, dtype=bool), total))
    return float(np.mean(aps)) if aps else 0.0


def _average_precision(scores: np.ndarray, hits: np.ndarray, total: int) -> float:
    if total == 0:
        return 0.0
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(hits[order])
    fp = np.cumsum(~hits[order])
    recall = tp / total
    precision = tp / np.maximum(tp + fp, 1e-12)
    precision = np.maximum.accumulate(precision[::-1])[::-1] if len(precision) else precision  # make monotone
    idx = np.searchsorted(recall, RECALLS, side="left")
    return float(np.mean([precision[i] if i < len(precision) else 0.0 for i in idx]))


def words(symbols: np.ndarray, space: int = 1) -> list[tuple[int, ...]]:
    """Character ids split into words at the space symbol."""
    text: list[tuple[int, ...]] = []
    word: list[int] = []
    for s in np.asarray(symbols).tolist():
        if s == space:
            if word:
                text.append(tuple(word))
            word = []
        else:
            word.append(s)
    return text + ([tuple(word)] if word else [])


def edit_distance(a: list[Any], b: list[Any]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]
