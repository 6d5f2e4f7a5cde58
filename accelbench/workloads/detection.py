"""Object detection and instance segmentation: SSD300 and Mask R-CNN from torchvision.

Both take a list of images and a list of target dicts and return a dict of
losses (classification, box regression, and for Mask R-CNN the RPN and mask
losses), summed here as the training objective. Synthetic targets place a few
random boxes (and, for Mask R-CNN, filled masks) in each image. No weights are
downloaded (``weights=None, weights_backbone=None``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.workloads.base import ModelInfo, Workload

if TYPE_CHECKING:
    import torch

OBJECTS_PER_IMAGE = 4


def _targets(batch_size: int, size: int, classes: int, device: "torch.device", masks: bool) -> list[dict[str, Any]]:
    import torch

    out = []
    for _ in range(batch_size):
        xy = torch.rand(OBJECTS_PER_IMAGE, 2, device=device) * size * 0.6
        wh = torch.rand(OBJECTS_PER_IMAGE, 2, device=device) * size * 0.3 + size * 0.05
        boxes = torch.cat([xy, xy + wh], dim=1)
        target: dict[str, Any] = {
            "boxes": boxes,
            "labels": torch.randint(1, classes, (OBJECTS_PER_IMAGE,), device=device),
        }
        if masks:
            m = torch.zeros(OBJECTS_PER_IMAGE, size, size, dtype=torch.uint8, device=device)
            for i, (x0, y0, x1, y1) in enumerate(boxes.round().long().tolist()):
                m[i, y0:y1, x0:x1] = 1
            target["masks"] = m
        out.append(target)
    return out


class _Detector(Workload):
    size = 300
    tiny_size = 128
    classes = 91  # COCO's category ids
    masks = False

    def image_size(self, scale: str) -> int:
        return self.size if scale == "full" else self.tiny_size

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        s = self.image_size(scale)
        images = [torch.rand(3, s, s, device=device) for _ in range(batch_size)]
        classes = self.classes if scale == "full" else 5
        return images, _targets(batch_size, s, classes, device, self.masks)

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        images, targets = batch
        losses = model(images, targets)  # torchvision's detectors return their losses by name in training
        total: torch.Tensor = sum(losses.values())
        return total


class SSD300(_Detector):
    info = ModelInfo(
        name="ssd",
        domain="object detection",
        sample_unit="images",
        input_shape="list of (3, 300, 300) images + boxes",
        default_batch={"gpu": 64, "cpu": 2},
        source="SSD300 with MLPerf v0.5's ResNet-34 backbone (conv5_x removed, conv4_x at stride 1, six heads "
        "at 38..1) on torchvision's SSD; defined in accelbench",
    )

    def build(self, scale: str) -> "torch.nn.Module":
        return ssd300_resnet34(self.classes if scale == "full" else 5)


def ssd300_resnet34(num_classes: int) -> "torch.nn.Module":
    """MLPerf Training v0.5's SSD: SSD300 on a ResNet-34 whose conv5_x blocks are removed and whose conv4_x block
    starts at stride 1, so the first head reads a 38x38 map of 256 channels; five extra blocks (a 1x1 then a 3x3
    convolution, each with ReLU) bring it to 19, 10, 5, 3 and 1 (512, 512, 256, 256, 256 channels), and 4, 6, 6,
    6, 4 and 4 default boxes per cell (8,732 in all) with the reference's scales and steps. torchvision's SSD
    does the matching, box coding, hard-negative mining and post-processing, as for its VGG-16 SSD300."""
    from collections import OrderedDict

    from torch import nn
    from torchvision.models import resnet34
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
    from torchvision.models.detection.ssd import SSD

    def extra(cin: int, mid: int, cout: int, stride: int, padding: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, mid, 1),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 3, stride, padding),
            nn.ReLU(inplace=True),
        )

    class Backbone(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            r = resnet34(weights=None)
            r.layer3[0].conv1.stride = (1, 1)  # conv4_x at stride 1: 38x38 at 300 pixels
            r.layer3[0].downsample[0].stride = (1, 1)
            self.body = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3)
            self.extras = nn.ModuleList(
                [
                    extra(256, 256, 512, 2, 1),
                    extra(512, 256, 512, 2, 1),
                    extra(512, 128, 256, 2, 1),
                    extra(256, 128, 256, 1, 0),
                    extra(256, 128, 256, 1, 0),
                ]
            )
            for block in self.extras:  # Xavier, as the reference initialises its added layers
                for param in block.parameters():
                    if param.dim() > 1:
                        nn.init.xavier_uniform_(param)

        def forward(self, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
            maps = [self.body(x)]
            for block in self.extras:
                maps.append(block(maps[-1]))
            return OrderedDict((str(i), m) for i, m in enumerate(maps))

    anchors = DefaultBoxGenerator(
        [[2], [2, 3], [2, 3], [2, 3], [2], [2]],
        scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05],
        steps=[8, 16, 32, 64, 100, 300],
    )
    model: torch.nn.Module = SSD(Backbone(), anchors, (300, 300), num_classes, image_mean=_MEAN, image_std=_STD)
    return model


class MaskRCNN(_Detector):
    size = 800
    tiny_size = 128
    masks = True
    info = ModelInfo(
        name="maskrcnn",
        domain="instance segmentation",
        sample_unit="images",
        input_shape="list of (3, 800, 800) images + boxes and masks",
        default_batch={"gpu": 4, "cpu": 1},
        source="torchvision.models.detection.maskrcnn_resnet50_fpn (Mask R-CNN, ResNet-50 FPN)",
    )

    def build(self, scale: str) -> "torch.nn.Module":
        from torchvision.models.detection import maskrcnn_resnet50_fpn

        s = self.image_size(scale)
        classes = self.classes if scale == "full" else 5
        model: torch.nn.Module = maskrcnn_resnet50_fpn(
            weights=None, weights_backbone=None, num_classes=classes, min_size=s, max_size=s
        )
        return model


def _block(cin: int, cout: int, pool: bool = True) -> "torch.nn.Module":
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), *([nn.MaxPool2d(2)] if pool else [])
    )


#: the normalisation torchvision's detectors apply (ImageNet's channel statistics)
_MEAN, _STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def small_ssd(num_classes: int, size: int) -> "torch.nn.Module":
    """torchvision's SSD (its matching, box coding, hard-negative mining and post-processing) on a five-block
    convolutional backbone with feature maps at 1/8, 1/16 and 1/32 of the input: the detector time to quality
    trains at ``--scale tiny``, where VGG-16 at 300x300 would take hours on a CPU."""
    from collections import OrderedDict

    from torch import nn
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
    from torchvision.models.detection.ssd import SSD

    class Backbone(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(_block(3, 16), _block(16, 32), _block(32, 64))
            self.down1, self.down2 = _block(64, 64), _block(64, 64)

        def forward(self, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
            a = self.stem(x)
            b = self.down1(a)
            return OrderedDict([("0", a), ("1", b), ("2", self.down2(b))])

    anchors = DefaultBoxGenerator([[2], [2], [2]], min_ratio=0.2, max_ratio=0.9)
    model: torch.nn.Module = SSD(Backbone(), anchors, (size, size), num_classes, image_mean=_MEAN, image_std=_STD)
    return model


def small_maskrcnn(num_classes: int, size: int, width: int = 32) -> "torch.nn.Module":
    """torchvision's Mask R-CNN (its RPN, RoIAlign, box and mask heads, losses and mask pasting) on a three-block
    convolutional backbone with one feature map at 1/4 of the input, anchors of 8-32 pixels, and box and mask
    heads ``width`` wide with fewer proposals sampled: the instance segmentation time to quality trains at
    ``--scale tiny``, where ResNet-50 FPN at 800 pixels would take hours on a CPU."""
    from collections import OrderedDict

    from torch import nn
    from torchvision.models.detection import MaskRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
    from torchvision.ops import MultiScaleRoIAlign

    class Backbone(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(_block(3, 16), _block(16, 32), _block(32, width, pool=False))
            self.out_channels = width

        def forward(self, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
            return OrderedDict([("0", self.body(x))])

    model: torch.nn.Module = MaskRCNN(
        Backbone(),
        min_size=size,
        max_size=size,
        image_mean=_MEAN,
        image_std=_STD,
        rpn_anchor_generator=AnchorGenerator(((8, 16, 32),), ((0.5, 1.0, 2.0),)),
        rpn_pre_nms_top_n_train=300,
        rpn_post_nms_top_n_train=100,
        rpn_pre_nms_top_n_test=150,
        rpn_post_nms_top_n_test=50,
        rpn_batch_size_per_image=64,
        box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2),
        box_head=TwoMLPHead(width * 7 * 7, 2 * width),
        box_predictor=FastRCNNPredictor(2 * width, num_classes),
        box_batch_size_per_image=32,
        box_detections_per_img=20,
        mask_roi_pool=MultiScaleRoIAlign(["0"], 14, 2),
        mask_head=MaskRCNNHeads(width, [width, width], 1),
        mask_predictor=MaskRCNNPredictor(width, width, num_classes),
    )
    return model
