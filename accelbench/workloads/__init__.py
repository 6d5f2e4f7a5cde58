"""What is trained and served: models behind the :class:`~accelbench.workloads.base.Workload` contract.

The registry names each built-in model; ``module:Class`` names a user's own
workload class (see :mod:`accelbench.workloads.base`).
"""

from __future__ import annotations

import difflib

from accelbench.errors import UsageError
from accelbench.plugins import load_class, with_installed
from accelbench.workloads.base import ModelInfo, Workload

#: decoder presets (accelbench.workloads.decoder), named here without importing transformers
DECODERS = {
    name: name.replace("-", "_").replace(".", "_")
    for name in (
        "llama2-7b", "llama2-70b", "llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mixtral-8x7b", "gpt-oss-20b",
        "gpt-oss-120b",
    )
}  # fmt: skip


def is_decoder(model: str) -> bool:
    """Whether ``model`` is a decoder preset: a language model, trained by ``train/llm`` and served token by token
    by ``infer/llm`` (every other model, a user's ``package.module:Class`` included, is the other benchmarks')."""
    return model in DECODERS


MODELS: dict[str, str] = {
    "resnet18": "accelbench.workloads.vision:ResNet18",
    "resnet50": "accelbench.workloads.vision:ResNet50",
    "resnet152": "accelbench.workloads.vision:ResNet152",
    "inception_v3": "accelbench.workloads.vision:InceptionV3",
    "inception_v4": "accelbench.workloads.vision:InceptionV4",
    "vgg16": "accelbench.workloads.vision:VGG16",
    "nasnet": "accelbench.workloads.vision:NASNet",
    "transformer": "accelbench.workloads.translation:TransformerBase",
    "gnmt": "accelbench.workloads.translation:GNMT",
    "bert": "accelbench.workloads.language:BertBase",
    "bert-large": "accelbench.workloads.language:BertLarge",
    "ssd": "accelbench.workloads.detection:SSD300",
    "maskrcnn": "accelbench.workloads.detection:MaskRCNN",
    "ncf": "accelbench.workloads.recommendation:NCF",
    "dlrm": "accelbench.workloads.recommendation:DLRM",
    "rnnt": "accelbench.workloads.speech:RNNT",
    "unet3d": "accelbench.workloads.medical:UNet3DWorkload",
} | {name: f"accelbench.workloads.decoder:{cls}" for name, cls in DECODERS.items()}


def _load(path: str) -> type[Workload]:
    # load_class instantiates nothing: an abstract base is what it checks against (python/mypy#4717)
    return load_class(path, Workload, "workload")  # type: ignore[type-abstract]


def workload_class(name: str) -> type[Workload]:
    """A built-in model by name, one an installed package declares (:mod:`accelbench.plugins`), or a user's
    ``package.module:Class``."""
    if ":" in name:
        return _load(name)
    known = with_installed("model", MODELS)
    if name not in known:
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; models: {', '.join(known)}"
        raise UsageError(f"unknown model {name!r}{hint}")
    return _load(str(known[name]))


def model_info(name: str) -> ModelInfo:
    return workload_class(name).info
