"""Recurrent layers (vanilla tanh RNN, LSTM, GRU) over a sequence, inference and training, as ``torch.nn.RNN/LSTM/GRU``
(cuDNN's fused kernels on CUDA). FLOPs count each step's matrix products by every gate (vanilla 1, GRU 3, LSTM 4)
and ignore the element-wise gate arithmetic, as DeepBench does; training counts 3x the forward, the backward
computing gradients of both the inputs and the weights (docs/kernels.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, cast

from accelbench.devices import device_label
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import FLOAT_PRECISIONS, torch_dtype
from accelbench.kernels.common import KernelCase, relative_error, run_kernel
from accelbench.kernels.specs import RnnParams
from accelbench.kit.context import RunContext
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

SUPPORTED = FLOAT_PRECISIONS
GATES = {"vanilla": 1, "gru": 3, "lstm": 4}


def rnn_flops(p: RnnParams) -> int:
    input_size = p.hidden
    forward = p.timesteps * GATES[p.cell] * 2 * p.batch * p.hidden * (input_size + p.hidden)
    return forward * (3 if p.phase == "fwd_bwd" else 1)


def rnn_bytes(p: RnnParams, element_size: int) -> int:
    """Weights read once per pass, inputs read and outputs written once (a lower bound)."""
    weights = GATES[p.cell] * p.hidden * (2 * p.hidden)
    activations = 2 * p.timesteps * p.batch * p.hidden
    return (weights + activations) * element_size * (3 if p.phase == "fwd_bwd" else 1)


def _layer(p: RnnParams) -> "torch.nn.Module":
    import torch

    cls: Callable[..., torch.nn.Module] = {"vanilla": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[p.cell]
    kwargs = {"nonlinearity": "tanh"} if p.cell == "vanilla" else {}
    return cls(p.hidden, p.hidden, num_layers=1, **kwargs)


def build_case(p: RnnParams, device: "torch.device") -> KernelCase:
    import torch

    torch.manual_seed(0)
    dtype = torch_dtype(p.precision)
    layer = _layer(p).to(device=device, dtype=dtype)
    reference = _layer(p).double().to(device)
    reference.load_state_dict(layer.state_dict())
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(p.timesteps, p.batch, p.hidden, generator=gen).to(device=device, dtype=dtype)
    train = p.phase == "fwd_bwd"
    if train:
        x.requires_grad_(True)
    grad = torch.randn(p.timesteps, p.batch, p.hidden, generator=gen).to(device=device, dtype=dtype)

    def step(module: "torch.nn.Module", inp: "torch.Tensor", g: "torch.Tensor") -> tuple["torch.Tensor", ...]:
        if not train:
            with kind_of(device).no_grad():
                return (module(inp)[0],)
        inp.grad = None
        out = module(inp)[0]
        out.backward(g)
        return cast("tuple[torch.Tensor, ...]", (out.detach(), inp.grad))  # backward filled inp.grad

    def fn() -> tuple["torch.Tensor", ...]:
        return step(layer, x, grad)

    def error() -> float:
        outs = fn()
        xr = x.detach().double().requires_grad_(train)
        refs = step(reference, xr, grad.double())
        return max(relative_error(o, r) for o, r in zip(outs, refs, strict=True))

    return KernelCase(
        fn=fn,
        precision=p.precision,
        flops=rnn_flops(p),
        bytes_moved=rnn_bytes(p, x.element_size()),
        error=error,
        details={"device_name": device_label(device), "gates": GATES[p.cell]},
    )


def run(params: RnnParams, ctx: RunContext) -> Iterator[Result]:
    return run_kernel(params, ctx, build_case, SUPPORTED)
