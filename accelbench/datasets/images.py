"""Image conventions every family's image datasets share."""

from __future__ import annotations

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
#: ImageNet's per-channel mean and deviation: the normalisation torchvision's classifiers are trained with
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
