"""A device kind of one's own, defined outside accelbench: an "accelerator" that computes on CPU tensors.

Registered through ``ACCELBENCH_DEVICE_KINDS=fake_kind`` (inherited by every process accelbench starts), it
is the proof that a new kind is one module: its synchronisations and memory readings are logged to the file
named by ``FAKE_KIND_LOG``, so a test can see that the timer, the training loop and serving asked it.
"""

from __future__ import annotations

import os

from accelbench.devices.kind import DeviceKind


def _log(what: str) -> None:
    path = os.environ.get("FAKE_KIND_LOG")
    if path:
        with open(path, "a") as f:
            f.write(what + "\n")


class FakeKind(DeviceKind):
    name = "fakeaccel"
    torch_type = "cpu"  # its tensors live in host memory: it claims every CPU device once registered
    vendor = "Test Vendor"
    accelerator = True
    batch_class = "cpu"  # published GPU batch sizes would not fit a test's time

    def count(self) -> int:
        return 2

    def resolve(self, index):  # type: ignore[no-untyped-def]
        import torch

        return torch.device("cpu")

    def label(self, device):  # type: ignore[no-untyped-def]
        return "Fake Accelerator 9000"

    def record_name(self, device=None):  # type: ignore[no-untyped-def]
        return self.name

    def synchronize(self, device):  # type: ignore[no-untyped-def]
        _log("synchronize")

    def reset_peak_memory(self, device):  # type: ignore[no-untyped-def]
        _log("reset_peak_memory")
        return 0

    def peak_memory(self, device):  # type: ignore[no-untyped-def]
        return 12345

    def memory_method(self):  # type: ignore[no-untyped-def]
        return "fake counter"


KIND = FakeKind()
