"""Medical imaging: 3D U-Net for volumetric segmentation, as MLPerf's KiTS19 benchmark trains it.

Five resolution levels of two 3x3x3 convolutions with instance normalisation
and leaky ReLU (filters 32-64-128-256-320), strided convolutions down,
transposed convolutions up with skip connections, on 128^3 single-channel
patches, three output classes; loss: cross-entropy plus soft Dice. Defined in
accelbench, no weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.workloads.base import ModelInfo, Workload

if TYPE_CHECKING:
    import torch

FULL = ((32, 64, 128, 256, 320), 128)
TINY = ((4, 8, 16), 16)
CLASSES = 3


def _unet3d(filters: tuple[int, ...]) -> "torch.nn.Module":
    import torch
    from torch import nn

    def block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=False),
            nn.InstanceNorm3d(cout, affine=True),
            nn.LeakyReLU(0.01, inplace=True),
            nn.Conv3d(cout, cout, 3, padding=1, bias=False),
            nn.InstanceNorm3d(cout, affine=True),
            nn.LeakyReLU(0.01, inplace=True),
        )

    class UNet3D(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down = nn.ModuleList([block(1, filters[0])])
            self.down.extend(block(a, b, stride=2) for a, b in zip(filters[:-1], filters[1:], strict=True))
            self.up = nn.ModuleList(
                nn.ConvTranspose3d(b, a, 2, stride=2) for a, b in zip(filters[:-1], filters[1:], strict=True)
            )
            self.fuse = nn.ModuleList(block(2 * a, a) for a in filters[:-1])
            self.head = nn.Conv3d(filters[0], CLASSES, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            skips = []
            for level in self.down:
                x = level(x)
                skips.append(x)
            for i in reversed(range(len(self.up))):
                x = self.fuse[i](torch.cat([self.up[i](x), skips[i]], dim=1))
            logits: torch.Tensor = self.head(x)
            return logits

    return UNet3D()


class UNet3DWorkload(Workload):
    info = ModelInfo(
        name="unet3d",
        domain="medical imaging",
        sample_unit="volumes",
        input_shape="(batch, 1, 128, 128, 128)",
        default_batch={"gpu": 2, "cpu": 1},
        source="3D U-Net (MLPerf KiTS19 configuration); defined in accelbench",
    )

    def build(self, scale: str) -> "torch.nn.Module":
        return _unet3d((FULL if scale == "full" else TINY)[0])

    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        import torch

        s = (FULL if scale == "full" else TINY)[1]
        volume = torch.randn(batch_size, 1, s, s, s, device=device)
        labels = torch.randint(0, CLASSES, (batch_size, s, s, s), device=device)
        return volume, labels

    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        import torch.nn.functional as F

        volume, labels = batch
        logits: torch.Tensor = model(volume)
        ce = F.cross_entropy(logits, labels)
        probs = logits.float().softmax(dim=1)
        onehot = F.one_hot(labels, CLASSES).permute(0, 4, 1, 2, 3).float()
        inter = (probs * onehot).sum(dim=(2, 3, 4))
        dice = (2 * inter + 1e-5) / (probs.sum(dim=(2, 3, 4)) + onehot.sum(dim=(2, 3, 4)) + 1e-5)
        return ce + (1 - dice.mean())
