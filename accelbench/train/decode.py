"""JPEG decoding on the training device: ``train --data real --decode device`` (torchvision; nvJPEG on NVIDIA).

On a GPU the CPU's decoding is the usual reason real data trails synthetic. On a kind that says it can
(``jpeg_decode``), the loader workers only read the files' bytes and the decode and augmentation run on the
device, on the training stream, so their time is inside the step; other formats (PNG) are decoded on the CPU and
augmented on the device. ``--decode cuda``, the option's first name, still means ``device``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.datasets.images import MEAN, STD
from accelbench.devices.kind import kind_of
from accelbench.errors import BenchmarkSkipped

if TYPE_CHECKING:
    import torch

#: where JPEGs are decoded: the loader workers' CPUs, the training device, or the device where its kind can
DECODERS = ("auto", "cpu", "device", "cuda")
#: the names an earlier release gave a decoder, read as today's (the record names today's)
DECODER_SYNONYMS = {"cuda": "device"}
JPEG_SUFFIXES = (".jpg", ".jpeg")
#: RandomResizedCrop's defaults (torchvision), the same on both paths
SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)


def decoder_name(decode: str) -> str:
    """The decoder a user's ``--decode`` value names (``cuda`` is ``device``)."""
    return DECODER_SYNONYMS.get(decode, decode)


def device_decode_reason(device: "torch.device") -> str | None:
    """Why JPEGs cannot be decoded on ``device`` by this torchvision, or None; found by decoding one."""
    kind = kind_of(device)
    if not kind.jpeg_decode:
        return f"torchvision decodes JPEG on NVIDIA GPUs (nvJPEG) only, not on the {kind.name} device"
    try:
        import torch
        from torchvision.io import decode_jpeg, encode_jpeg

        probe = encode_jpeg(torch.full((3, 16, 16), 128, dtype=torch.uint8))
        decode_jpeg([probe], device=device)
    except Exception as exc:  # a torchvision built without nvJPEG raises here
        return f"torchvision cannot decode JPEG on {device} ({type(exc).__name__}: {str(exc).splitlines()[0]})"
    return None


def resolve(decode: str, device: "torch.device") -> tuple[str, str | None]:
    """The decoder that will run (``cpu`` or ``device``) and, when ``auto`` fell back to the CPU, why."""
    decode = decoder_name(decode)
    if decode == "cpu" or (decode == "auto" and not kind_of(device).jpeg_decode):
        return "cpu", None
    reason = device_decode_reason(device)
    if reason is None:
        return "device", None
    if decode == "device":
        raise BenchmarkSkipped(f"--decode device: {reason}")
    return "cpu", reason


class EncodedImages:
    """ImageFolder's samples undecoded: the file's bytes (a 1-D uint8 tensor), its label, whether it is a JPEG."""

    def __init__(self, samples: list[tuple[str, int]], classes: int) -> None:
        self.samples, self.classes = samples, classes

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple["torch.Tensor", int, bool]:
        from torchvision.io import read_file

        path, label = self.samples[i]
        return read_file(path), label % self.classes, path.lower().endswith(JPEG_SUFFIXES)


def collate(
    batch: list[tuple["torch.Tensor", int, bool]],
) -> tuple["torch.Tensor", "torch.Tensor", "torch.Tensor", "torch.Tensor"]:
    """The batch's files packed into one byte tensor with their sizes: a worker hands over four tensors, not one
    per file (128 tensors a batch ran out of file descriptors in torch's sharing and hung the loader)."""
    import torch

    return (
        torch.cat([item[0] for item in batch]),
        torch.tensor([item[0].numel() for item in batch]),
        torch.tensor([item[2] for item in batch]),
        torch.tensor([item[1] for item in batch]),
    )


class DeviceAugment:
    """Decode a batch's JPEGs on the device in one call, then crop, flip and normalize each image there."""

    def __init__(self, device: "torch.device", size: int) -> None:
        import torch

        self.device, self.size = device, size
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def __call__(self, batch: tuple["torch.Tensor", ...]) -> tuple["torch.Tensor", "torch.Tensor"]:
        import torch
        from torchvision.io import ImageReadMode, decode_image, decode_jpeg
        from torchvision.transforms import RandomResizedCrop

        packed, sizes, is_jpeg, labels = batch
        files, flags = torch.split(packed, sizes.tolist()), is_jpeg.tolist()
        jpegs = [f for f, jpeg in zip(files, flags, strict=True) if jpeg]
        decoded = iter(decode_jpeg(jpegs, mode=ImageReadMode.RGB, device=self.device) if jpegs else [])
        out = torch.empty(len(files), 3, self.size, self.size, device=self.device)
        for k, (f, jpeg) in enumerate(zip(files, flags, strict=True)):
            image = next(decoded) if jpeg else decode_image(f, mode=ImageReadMode.RGB).to(self.device)
            # torchvision's own box sampling (it reads only the shape; the draws are on the host: no device sync)
            top, left, h, w = RandomResizedCrop.get_params(image, list(SCALE), list(RATIO))
            crop = image[:, top : top + h, left : left + w].float().unsqueeze(0)
            crop = torch.nn.functional.interpolate(
                crop, size=(self.size, self.size), mode="bilinear", align_corners=False, antialias=True
            )
            out[k] = crop[0].flip(-1) if torch.rand(1).item() < 0.5 else crop[0]
        out = out.div_(255.0).sub_(self.mean).div_(self.std)
        return out, labels.to(self.device, non_blocking=True)


def encoded_folder(root: Path, classes: int, is_valid: Any) -> tuple[EncodedImages, list[str]]:
    """The class folders' files as ImageFolder lists them (same order, same class indices), undecoded."""
    from torchvision.datasets import ImageFolder

    listing = ImageFolder(str(root), is_valid_file=is_valid, loader=lambda p: p)
    return EncodedImages(list(listing.samples), classes), list(listing.classes)
