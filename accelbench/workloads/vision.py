"""Image classification: the tf_cnn_benchmarks set of the 4x Quadro RTX 8000 article (2020), from torchvision and timm.

Models are created with random weights (``weights=None`` / ``pretrained=False``):
nothing is downloaded. ResNet-50 from torchvision is v1.5 (stride 2 in the 3x3
convolution of each downsampling block), as MLPerf specifies. The "tiny" scale
keeps each architecture but feeds it small images (and, for VGG, fewer classes),
so a CPU test runs a step in a fraction of a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.workloads.base import ModelInfo, Workload

if TYPE_CHECKING:
    import torch


class ImageClassifier(Workload):
    """Cross-entropy on random images and labels; subclasses say how to build the network."""

    image_size = 224
    tiny_image_size = 64
    num_classes = 1000

    def size(self, scale: str) -> int:
        return self.image_size if scale == "full" else self.tiny_image_size

    def classes(self, scale: str) -> int:
        return self.num_classes if scale == "full" else 10

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        s = self.size(scale)
        images = torch.randn(batch_size, 3, s, s, device=device)
        labels = torch.randint(0, self.classes(scale), (batch_size,), device=device)
        return images, labels

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        import torch.nn.functional as F

        images, labels = batch
        out = model(images)
        if isinstance(out, tuple):  # inception_v3's auxiliary logits in training mode
            out = out[0]
        elif hasattr(out, "logits"):
            out = out.logits
        return F.cross_entropy(out, labels)


def _info(name: str, source: str, gpu_batch: int, size: int = 224, cpu_batch: int = 16) -> ModelInfo:
    return ModelInfo(
        name=name,
        domain="image classification",
        sample_unit="images",
        input_shape=f"(batch, 3, {size}, {size})",
        default_batch={"gpu": gpu_batch, "cpu": cpu_batch},
        image_input=True,
        source=source,
    )


class TorchvisionClassifier(ImageClassifier):
    arch = "resnet50"

    def build(self, scale: str) -> "torch.nn.Module":
        import torchvision

        kwargs: dict[str, Any] = {"weights": None, "num_classes": self.classes(scale)}
        if self.arch == "inception_v3":
            # the auxiliary head needs 299-pixel inputs; the tiny scale goes without it
            kwargs |= {"aux_logits": scale == "full", "init_weights": False}
        model: torch.nn.Module = getattr(torchvision.models, self.arch)(**kwargs)
        return model


class ResNet18(TorchvisionClassifier):
    arch = "resnet18"
    info = _info("resnet18", "torchvision.models.resnet18", 256)


class ResNet50(TorchvisionClassifier):
    arch = "resnet50"
    info = _info("resnet50", "torchvision.models.resnet50 (v1.5)", 256)


class ResNet152(TorchvisionClassifier):
    arch = "resnet152"
    info = _info("resnet152", "torchvision.models.resnet152", 128)


class VGG16(TorchvisionClassifier):
    arch = "vgg16"
    info = _info("vgg16", "torchvision.models.vgg16", 128)


class InceptionV3(TorchvisionClassifier):
    arch = "inception_v3"
    image_size = 299
    tiny_image_size = 75  # the smallest input inception_v3 accepts
    info = _info("inception_v3", "torchvision.models.inception_v3", 128, size=299)


class TimmClassifier(ImageClassifier):
    arch = "inception_v4"

    def build(self, scale: str) -> "torch.nn.Module":
        import timm

        return timm.create_model(self.arch, pretrained=False, num_classes=self.classes(scale))


class InceptionV4(TimmClassifier):
    arch = "inception_v4"
    image_size = 299
    tiny_image_size = 75
    info = _info("inception_v4", "timm inception_v4", 128, size=299)


class NASNet(TimmClassifier):
    arch = "nasnetalarge"
    image_size = 331
    tiny_image_size = 64
    info = _info("nasnet", "timm nasnetalarge", 64, size=331, cpu_batch=4)
