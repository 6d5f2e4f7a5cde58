"""The ONNX export the ONNX Runtime, TensorRT and OpenVINO backends serve, made once per run and weights."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.cache import touch, trim
from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch

    from accelbench.infer.served import Inputs


def export(model: "torch.nn.Module", example: "Inputs", path: Path, cache_dir: Path | None = None) -> Path:
    """torch.onnx's exporter with a dynamic batch dimension, so any batch the SUT forms runs.

    With ``cache_dir`` (the export cache, :mod:`accelbench.cache`), an export of the same weights, input shapes
    and torch version made by an earlier entry or run is reused: a search serves one model on several ONNX
    backends and batches, and each export of ResNet-50 takes 10 s. A new export is added, and the cache trimmed
    to its cap.
    """
    cached = cache_dir / f"{_export_key(model, example)}.onnx" if cache_dir is not None else None
    if cached is not None and cached.is_file():
        shutil.copyfile(cached, path)
        touch(cached)
        # the entry's log says so: the export is skipped (10 s for ResNet-50)
        print(f"accelbench: reusing the ONNX export {cached} from the export cache", file=sys.stderr)
        return path
    _export(model, example, path)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.partial")
        shutil.copyfile(path, partial)
        partial.replace(cached)  # atomic: a killed entry never leaves half a file under the final name
        print(f"accelbench: the ONNX export is kept in the export cache as {cached}", file=sys.stderr)
        trim(cache_dir)
    return path


def _export_key(model: "torch.nn.Module", example: "Inputs") -> str:
    """Every weight and buffer, the inputs' shapes and dtypes, and the torch version: what the export depends on."""
    import hashlib

    import torch

    h = hashlib.blake2b(torch.__version__.encode(), digest_size=16)
    for name, t in model.state_dict().items():
        h.update(f"{name}{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    for t in example:
        h.update(f"{tuple(t.shape[1:])}{t.dtype}".encode())
    return h.hexdigest()


def _export(model: "torch.nn.Module", example: "Inputs", path: Path) -> None:
    import torch

    batch = torch.export.Dim("batch", min=1, max=4096)
    example = tuple(t.cpu() for t in example)
    names = [f"input_{i}" for i in range(len(example))]
    try:
        torch.onnx.export(
            model.eval(),
            example,
            str(path),
            dynamo=True,
            input_names=names,
            dynamic_shapes=tuple({0: batch} for _ in example),
            external_data=False,
            verbose=False,
        )
    except Exception as exc:  # noqa: BLE001 - an exporter failure is a property of the model, said in one line
        raise UsageError(
            f"torch.onnx could not export this model for ONNX Runtime: {str(exc).splitlines()[0]}"
        ) from None
