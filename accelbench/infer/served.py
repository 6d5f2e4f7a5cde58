"""A workload as LoadGen serves it: one sample's inputs, how samples batch, what one answer is, how answers
score. One adapter a domain, so any model of that domain (a user's ``pkg.mod:Class`` too) is servable; answers
are small numpy arrays, what LoadGen writes to its accuracy log and the metric reads back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

import numpy as np

from accelbench.datasets.accuracy import check_coco, check_criteo, check_image_folder, check_npy_cases
from accelbench.errors import UsageError
from accelbench.infer.metrics import coco_map, edit_distance, words
from accelbench.workloads import workload_class
from accelbench.workloads.base import Workload

if TYPE_CHECKING:
    import torch

    from accelbench.datasets.accuracy import Samples

Inputs = tuple["torch.Tensor", ...]


class _Configured(Protocol):
    """A workload sized by a config per scale (BERT's, NCF's, DLRM's ``cfg``), which ``Workload`` does not declare."""

    def cfg(self, scale: str) -> Any: ...


def _config(workload: Workload, scale: str) -> Any:
    """``workload.cfg(scale)``: the adapters that call it serve only workloads that have one."""
    return cast(_Configured, workload).cfg(scale)


class Served:
    """The serving side of a workload; subclasses say how its answers look and score."""

    #: the quality metric and MLPerf's accuracy gates (fractions of the FP32 reference)
    quality_name: ClassVar[str] = "agreement"
    gates: ClassVar[tuple[float, ...]] = (0.99, 0.999)
    #: MLPerf Inference v0.7 datacenter Server latency bound (Dell EMC's v0.7 results table); None: Offline only
    server_bound_ms: ClassVar[float | None] = 100.0
    answer_dtype: ClassVar[Any] = np.float32
    #: how many leading elements of ``synthetic_batch`` are inputs (the rest are targets)
    n_inputs: ClassVar[int] = 1
    dataset_hint: ClassVar[str] = ""
    #: torch-free check of a dataset directory (None: no loader for this domain yet)
    check_dataset: ClassVar[Any] = None
    #: why torch.onnx cannot export this model for ONNX Runtime (None: it exports, with a dynamic batch)
    no_onnx: ClassVar[str | None] = None
    #: each answer is the argmax of its raw output row, so the row's lead of first over second is its margin
    #: (the fidelity gate then also asks that answers decided beyond rounding are kept)
    answer_is_argmax: ClassVar[bool] = False

    def __init__(self, workload: Workload, scale: str) -> None:
        self.workload = workload
        self.scale = scale

    def build(self) -> "torch.nn.Module":
        return self.workload.build(self.scale)

    def synthetic(self, index: int, device: "torch.device") -> Inputs:
        """Sample ``index`` of the performance set: the same input every time it is asked for, on every device.

        Drawn on the host under a seeded generator, then copied: ``torch.manual_seed`` does not seed every
        device's generator (XLA's is its own), and a sample drawn there anew at each request would be a
        different input for the served run and the reference."""
        import torch
        from torch.utils._pytree import tree_map

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(index)
            batch = self.workload.synthetic_batch(1, torch.device("cpu"), self.scale)
        # inputs may be nested (a detector's list of images): every tensor in them moves
        return tuple(tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, batch[: self.n_inputs]))

    def collate(self, samples: list[Inputs]) -> Inputs:
        import torch

        return tuple(torch.cat(parts) for parts in zip(*samples, strict=True))

    def forward(self, model: "torch.nn.Module", inputs: Inputs) -> Any:
        return model(*inputs)

    def answers(self, outputs: Any) -> list[np.ndarray]:
        """One answer per sample of the batch, as the client would receive it."""
        raise NotImplementedError

    def quality(self, answers: list[np.ndarray], labels: list[Any]) -> float:
        raise NotImplementedError

    def dataset(self, root: Path) -> "Samples":
        raise UsageError(
            f"no dataset loader for {self.workload.info.name} yet: accuracy mode reads image classifiers "
            "(ImageFolder), unet3d (.npy cases) and dlrm (Criteo logs)"
        )


class Classifier(Served):
    check_dataset = staticmethod(lambda root: check_image_folder(root))
    quality_name = "top1"
    answer_is_argmax = True
    gates = (0.99,)
    server_bound_ms = 15.0
    answer_dtype = np.int32
    dataset_hint = "an ImageFolder: one sub-folder per class (sorted names = class indices) of .png/.jpg images"

    def answers(self, outputs: Any) -> list[np.ndarray]:
        import torch

        top = outputs.float().argmax(dim=1).to("cpu", dtype=torch.int32).numpy()
        return [top[i : i + 1] for i in range(top.shape[0])]

    def quality(self, answers: list[np.ndarray], labels: list[Any]) -> float:
        return float(np.mean([int(a[0]) == int(y) for a, y in zip(answers, labels, strict=True)]))

    def dataset(self, root: Path) -> "Samples":
        import torch

        from accelbench.datasets.accuracy import image_folder

        shape = self.synthetic(0, torch.device("cpu"))[0].shape
        return image_folder(root, size=int(shape[-1]))


class Segmenter3D(Served):
    check_dataset = staticmethod(lambda root: check_npy_cases(root))
    quality_name = "mean_dice"
    server_bound_ms = None  # MLPerf runs 3D U-Net in Offline (and SingleStream) only
    answer_dtype = np.uint8
    dataset_hint = "KiTS19 cases preprocessed as the MLPerf reference does: case_*_x.npy volumes, case_*_y.npy labels"

    def answers(self, outputs: Any) -> list[np.ndarray]:
        import torch

        classes = outputs.float().argmax(dim=1).to("cpu", dtype=torch.uint8).numpy()
        return [classes[i].reshape(-1) for i in range(classes.shape[0])]

    def quality(self, answers: list[np.ndarray], labels: list[Any]) -> float:
        """Mean DICE over the foreground classes (kidney, tumour), as the KiTS19 metric."""
        scores = []
        for a, y in zip(answers, labels, strict=True):
            y = np.asarray(y).reshape(-1)
            for cls in range(1, int(max(a.max(initial=0), y.max(initial=0))) + 1):
                p, t = a == cls, y == cls
                denom = p.sum() + t.sum()
                scores.append(1.0 if denom == 0 else 2.0 * (p & t).sum() / denom)
        return float(np.mean(scores)) if scores else 1.0

    def dataset(self, root: Path) -> "Samples":
        from accelbench.datasets.accuracy import npy_cases

        return npy_cases(root)


class SpanReader(Served):
    """BERT on SQuAD: a start/end span over a 384-token sequence (MLPerf's BERT benchmark)."""

    quality_name = "span_exact_match"
    server_bound_ms = 130.0
    answer_dtype = np.int32
    seq_len: ClassVar[int] = 384

    def build(self) -> "torch.nn.Module":
        from accelbench.workloads.language import span_model

        return span_model(_config(self.workload, self.scale), self.seq_len if self.scale == "full" else None)

    def synthetic(self, index: int, device: "torch.device") -> Inputs:
        import torch

        cfg = _config(self.workload, self.scale)
        seq = self.seq_len if self.scale == "full" else cfg.seq_len
        g = torch.Generator().manual_seed(index)
        tokens = torch.randint(0, cfg.vocab, (1, seq), generator=g)
        segments = (torch.arange(seq) >= seq // 4).long().unsqueeze(0)  # a question, then its context
        return tokens.to(device), segments.to(device)

    def answers(self, outputs: Any) -> list[np.ndarray]:
        import torch

        spans = outputs.float().argmax(dim=1).to("cpu", dtype=torch.int32).numpy()  # (batch, 2): start, end
        return [spans[i] for i in range(spans.shape[0])]

    def quality(self, answers: list[np.ndarray], labels: list[Any]) -> float:
        return float(np.mean([tuple(a) == tuple(y) for a, y in zip(answers, labels, strict=True)]))


class ClickPredictor(Served):
    check_dataset = staticmethod(lambda root: check_criteo(root))
    quality_name = "auc"
    server_bound_ms = 60.0  # mlperf.conf's dlrm-v2
    n_inputs = 2

    def answers(self, outputs: Any) -> list[np.ndarray]:
        probs = outputs.float().sigmoid().cpu().numpy().astype(np.float32)
        return [probs[i : i + 1] for i in range(probs.shape[0])]

    def quality(self, answers: list[np.ndarray], labels: list[Any]) -> float:
        """ROC AUC from ranks (ties averaged), as sklearn's roc_auc_score."""
        from scipy.stats import rankdata

        scores = np.concatenate(answers)
        y = np.asarray(labels, dtype=bool)
        pos, neg = int(y.sum()), int((~y).sum())
        if pos == 0 or neg == 0:
            return float("nan")
        ranks = rankdata(scores)
        return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))

    def dataset(self, root: Path) -> "Samples":
        from accelbench.datasets.accuracy import criteo

        cfg = _config(self.workload, self.scale)
        if not hasattr(cfg, "tables"):
            return super().dataset(root)  # NCF: no Criteo-style input
        return criteo(root, cfg.tables, cfg.rows)


class Detector(Served):
    """SSD: boxes, scores and labels after the model's own non-maximum suppression; COCO mAP."""

    no_onnx = (
        "torch.onnx cannot export SSD's post-processing (box decoding and per-class NMS have data-dependent "
        "shapes): serve it with --backend torch or compile"
    )

    check_dataset = staticmethod(lambda root: check_coco(root))
    quality_name = "map"
    server_bound_ms = 100.0

    def quality(self, answers: list[np.ndarray], labels: list[Any]) -> float:
        return coco_map(answers, labels)

    def dataset(self, root: Path) -> "Samples":
        import torch

        from accelbench.datasets.accuracy import coco

        return coco(root, size=int(self.synthetic(0, torch.device("cpu"))[0].shape[-1]))

    def synthetic(self, index: int, device: "torch.device") -> Inputs:
        images = super().synthetic(index, device)[0]
        return (images[0].unsqueeze(0),)

    def forward(self, model: "torch.nn.Module", inputs: Inputs) -> Any:
        return model(list(inputs[0]))

    def answers(self, outputs: Any) -> list[np.ndarray]:
        import torch

        rows = []
        for det in outputs:
            table = torch.cat([det["boxes"], det["scores"][:, None], det["labels"][:, None].to(det["boxes"])], 1)
            rows.append(table.float().cpu().numpy().reshape(-1))
        return rows


class _Transducer(Protocol):
    """The parts of an RNN-T model the greedy decoder calls (``accelbench.workloads.speech``'s model has them)."""

    pre: torch.nn.LSTM
    post: torch.nn.LSTM
    enc_proj: torch.nn.Linear
    embed: torch.nn.Embedding
    pred: torch.nn.LSTM
    pred_proj: torch.nn.Linear
    out: torch.nn.Linear


class Transcriber(Served):
    """RNN-T with MLPerf's greedy decoder: per encoder frame, emit symbols until blank (at most 30 per frame)."""

    no_onnx = (
        "torch.onnx cannot export RNN-T's greedy decoding (a loop whose length depends on the audio): serve it "
        "with --backend torch or compile"
    )

    quality_name = "word_accuracy"
    server_bound_ms = 1000.0
    answer_dtype = np.int32
    MAX_SYMBOLS = 30

    def forward(self, model: "torch.nn.Module", inputs: Inputs) -> Any:
        import torch

        from accelbench.workloads.speech import BLANK

        rnnt = cast(_Transducer, model)  # a Module's submodules read as Tensor | Module to a type checker
        x, _ = rnnt.pre(inputs[0])
        b, t, h = x.shape
        enc, _ = rnnt.post(x[:, : t - t % 2].reshape(b, t // 2, 2 * h))
        enc = rnnt.enc_proj(enc)
        symbol = torch.full((b, 1), BLANK, dtype=torch.long, device=enc.device)
        g, state = rnnt.pred(rnnt.embed(symbol))
        out: list[list[int]] = [[] for _ in range(b)]
        for frame in range(enc.shape[1]):
            active = torch.ones(b, dtype=torch.bool, device=enc.device)
            for _ in range(self.MAX_SYMBOLS):
                k = rnnt.out(torch.relu(enc[:, frame] + rnnt.pred_proj(g[:, -1]))).argmax(-1)
                emit = active & (k != BLANK)
                if not bool(emit.any()):
                    break
                for i in emit.nonzero().flatten().tolist():
                    out[i].append(int(k[i]))
                g2, state2 = rnnt.pred(rnnt.embed(k[:, None]), state)
                keep = emit.view(1, b, 1)  # only samples that emitted advance their prediction network
                state = (torch.where(keep, state2[0], state[0]), torch.where(keep, state2[1], state[1]))
                g = torch.where(emit.view(b, 1, 1), g2, g)
                active = emit
        return out

    def answers(self, outputs: Any) -> list[np.ndarray]:
        return [np.asarray(seq, dtype=np.int32) for seq in outputs]

    def quality(self, answers: list[np.ndarray], labels: list[Any]) -> float:
        """1 - word error rate, words split at the space symbol (1), as MLPerf's RNN-T accuracy script."""
        errors = n_words = 0
        for a, y in zip(answers, labels, strict=True):
            hyp, ref = words(a), words(np.asarray(y))
            errors += edit_distance(hyp, ref)
            n_words += max(1, len(ref))
        return 1.0 - errors / n_words if n_words else 1.0


#: workload domain -> serving adapter
ADAPTERS: dict[str, type[Served]] = {
    "image classification": Classifier,
    "medical imaging": Segmenter3D,
    "language": SpanReader,
    "recommendation": ClickPredictor,
    "object detection": Detector,
    "speech recognition": Transcriber,
}


def served(model: str, scale: str) -> Served:
    workload = workload_class(model)()
    adapter = ADAPTERS.get(workload.info.domain)
    if adapter is None:
        servable = ", ".join(sorted(ADAPTERS))
        raise UsageError(f"serving {model} ({workload.info.domain}) is not supported yet; domains served: {servable}")
    return adapter(workload, scale)
