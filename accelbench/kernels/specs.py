"""Parameters of the kernel benchmarks; torch-free so that suites and the CLI parse instantly.

Field names are the flags (``--filter-w`` is ``filter_w``): the same words in every
kernel, in suite files and in stored records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import ALL_PRECISIONS, MATMUL_PRECISIONS
from accelbench.errors import UsageError
from accelbench.kit.ranks import check_nproc
from accelbench.params import KernelParams, NodesParams, opt, parse_size, positive


def _human_bytes(n: int) -> str:
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= scale and n % (scale // 1024 or 1) == 0:
            return f"{n / scale:g}{unit}"
    return f"{n}B"


@dataclass(frozen=True)
class GemmParams(KernelParams):
    """C[batch, m, n] = A[batch, m, k] @ B[batch, k, n]; batch 1 is a plain matrix multiply."""

    m: int = opt(1024, "rows of A and C")
    n: int = opt(1024, "columns of B and C")
    k: int = opt(1024, "the reduced dimension")
    batch: int = opt(1, "number of independent products (batched GEMM when > 1)")
    a_t: bool = opt(False, "store A transposed (DeepBench's a_t)", sweep=False)
    b_t: bool = opt(False, "store B transposed (DeepBench's b_t)", sweep=False)
    precision: str = opt("fp32", "operand precision", choices=MATMUL_PRECISIONS)
    fast_accum: bool = opt(
        False, "fp8 only: torch._scaled_mm's use_fast_accum (Tensor Core accumulation, no FP32 promotion)", sweep=False
    )

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        words = [f"{p['m']}x{p['n']}x{p['k']}"]
        if p.get("batch", 1) > 1:
            words.append(f"batch={p['batch']}")
        words += [t for t in ("a_t", "b_t") if p.get(t)]
        return " ".join([*words, str(p.get("precision", ""))] + (["fast-accum"] if p.get("fast_accum") else []))

    def validate(self) -> None:
        super().validate()
        for name in ("m", "n", "k", "batch"):
            positive(f"--{name}", getattr(self, name))
        if self.fast_accum and self.precision != "fp8":
            raise UsageError(f"--fast-accum applies to --precision fp8 only (not {self.precision})")


CONV_PHASES = ("fwd", "bwd_data", "bwd_filter", "fwd_bwd")


@dataclass(frozen=True)
class ConvParams(KernelParams):
    """2-D convolution in DeepBench's terms: input w x h x c, batch n, k filters of filter_w x filter_h."""

    w: int = opt(56, "input width")
    h: int = opt(56, "input height")
    c: int = opt(64, "input channels")
    n: int = opt(16, "batch size")
    k: int = opt(64, "output channels (number of filters)")
    filter_w: int = opt(3, "filter width (DeepBench's s)")
    filter_h: int = opt(3, "filter height (DeepBench's r)")
    pad_w: int = opt(1, "zero padding left and right")
    pad_h: int = opt(1, "zero padding top and bottom")
    stride_w: int = opt(1, "horizontal stride")
    stride_h: int = opt(1, "vertical stride")
    groups: int = opt(1, "groups (c and k must be multiples; c = groups is depthwise)")
    phase: str = opt("fwd", "which pass: forward, backward-data, backward-filter, or all three", choices=CONV_PHASES)
    layout: str = opt("nchw", "memory layout: nchw, or nhwc (channels_last)", choices=("nchw", "nhwc"))
    precision: str = opt("fp32", "operand precision", choices=ALL_PRECISIONS)

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        pad = p["pad_w"] if p["pad_w"] == p["pad_h"] else f"{p['pad_w']},{p['pad_h']}"
        stride = p["stride_w"] if p["stride_w"] == p["stride_h"] else f"{p['stride_w']},{p['stride_h']}"
        words = [f"{p['w']}x{p['h']}x{p['c']} n={p['n']} k={p['k']} {p['filter_w']}x{p['filter_h']}"]
        words += [f"pad {pad}"] if pad else []
        words += [f"stride {stride}"] if stride != 1 else []
        if p.get("groups", 1) > 1:
            words.append(f"groups={p['groups']}")
        return " ".join([*words, p["phase"], p["layout"], p["precision"]])

    def validate(self) -> None:
        super().validate()
        for name in ("w", "h", "c", "n", "k", "filter_w", "filter_h", "stride_w", "stride_h", "groups"):
            positive(f"--{name.replace('_', '-')}", getattr(self, name))
        if self.pad_w < 0 or self.pad_h < 0:
            raise UsageError("--pad-w and --pad-h must not be negative")
        if self.filter_w > self.w + 2 * self.pad_w or self.filter_h > self.h + 2 * self.pad_h:
            raise UsageError(
                f"filter {self.filter_w}x{self.filter_h} is larger than the padded input "
                f"{self.w + 2 * self.pad_w}x{self.h + 2 * self.pad_h}"
            )
        if self.c % self.groups or self.k % self.groups:
            raise UsageError(f"--c ({self.c}) and --k ({self.k}) must be multiples of --groups ({self.groups})")

    def output_hw(self) -> tuple[int, int]:
        out_h = (self.h + 2 * self.pad_h - self.filter_h) // self.stride_h + 1
        out_w = (self.w + 2 * self.pad_w - self.filter_w) // self.stride_w + 1
        return out_h, out_w


RNN_CELLS = ("vanilla", "lstm", "gru")
PHASES = ("fwd", "fwd_bwd")


@dataclass(frozen=True)
class RnnParams(KernelParams):
    """One recurrent layer over a sequence; the input size equals the hidden size, as in DeepBench."""

    hidden: int = opt(1024, "hidden size (and input size)")
    batch: int = opt(16, "batch size")
    timesteps: int = opt(50, "sequence length")
    cell: str = opt("lstm", "cell type: vanilla (tanh), lstm or gru", choices=RNN_CELLS)
    phase: str = opt("fwd", "fwd (inference) or fwd_bwd (training)", choices=PHASES)
    precision: str = opt("fp32", "operand precision", choices=ALL_PRECISIONS)

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        return f"{p['cell']} hidden={p['hidden']} batch={p['batch']} t={p['timesteps']} {p['phase']} {p['precision']}"

    def validate(self) -> None:
        super().validate()
        for name in ("hidden", "batch", "timesteps"):
            positive(f"--{name}", getattr(self, name))


@dataclass(frozen=True)
class AttentionParams(KernelParams):
    """Scaled dot-product self-attention over (batch, heads, seq_len, head_dim) tensors."""

    batch: int = opt(8, "batch size")
    heads: int = opt(16, "attention heads")
    seq_len: int = opt(1024, "sequence length (queries and keys)")
    head_dim: int = opt(64, "width of one head")
    width: int | None = opt(None, "model width; sets head_dim = width / heads")
    causal: bool = opt(False, "causal mask (decoder self-attention)", sweep=False)
    phase: str = opt("fwd", "fwd or fwd_bwd", choices=PHASES)
    precision: str = opt(
        "auto",
        "operand precision; auto: the device's fastest native one (fp16, else bf16, else fp32), recorded as run",
        choices=("auto", *ALL_PRECISIONS),
    )

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        d = p["width"] // p["heads"] if p.get("width") else p["head_dim"]
        causal = " causal" if p.get("causal") else ""
        return f"b={p['batch']} h={p['heads']} s={p['seq_len']} d={d}{causal} {p['phase']} {p['precision']}"

    def validate(self) -> None:
        super().validate()
        for name in ("batch", "heads", "seq_len", "head_dim"):
            positive(f"--{name.replace('_', '-')}", getattr(self, name))
        if self.width is not None:
            positive("--width", self.width)
            if self.width % self.heads:
                raise UsageError(f"--heads ({self.heads}) must divide --width ({self.width})")

    @property
    def dim(self) -> int:
        return self.width // self.heads if self.width is not None else self.head_dim


@dataclass(frozen=True)
class SparseParams(KernelParams):
    """Sparse A (m x k, a fraction ``density`` of it non-zero) times dense B (k x n)."""

    m: int = opt(4096, "rows of the sparse A")
    n: int = opt(64, "columns of the dense B")
    k: int = opt(4096, "columns of A / rows of B")
    density: float = opt(0.1, "fraction of A that is non-zero, in (0, 1]")
    format: str = opt("csr", "csr (any device), or semi24: 2:4 semi-structured (Ampere+)", choices=("csr", "semi24"))
    precision: str = opt("fp32", "operand precision", choices=ALL_PRECISIONS)

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        return f"{p['m']}x{p['n']}x{p['k']} density={p['density']:g} {p['format']} {p['precision']}"

    def validate(self) -> None:
        super().validate()
        for name in ("m", "n", "k"):
            positive(f"--{name}", getattr(self, name))
        if not 0 < self.density <= 1:
            raise UsageError(f"--density must be in (0, 1], got {self.density}")
        if self.format == "semi24" and self.density != 0.5:
            raise UsageError("--format semi24 keeps 2 of every 4 values: use --density 0.5")


@dataclass(frozen=True)
class MembwParams(KernelParams):
    """STREAM-style device memory bandwidth."""

    op: str = opt("triad", "copy (b = a) or triad (a = b + s*c)", choices=("copy", "triad"))
    size: str = opt("256M", "bytes per array (K, M, G suffixes)", flag="--sizes", metavar="SIZE")

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        return f"{p['op']} {p['size']}"

    def validate(self) -> None:
        super().validate()
        if parse_size(self.size) < 4:
            raise UsageError("--sizes: an array needs at least 4 bytes")


@dataclass(frozen=True)
class AllreduceParams(NodesParams, KernelParams):
    """all_reduce over ``nproc`` processes started by torchrun; all sizes in one launch."""

    nproc: int = opt(2, "processes (one per GPU on CUDA)", sweep=False)
    sizes: str = opt("4K,64K,1M,16M", "message sizes, comma list (K, M, G suffixes)", metavar="LIST", sweep=False)
    backend: str = opt("auto", "auto (nccl on CUDA, gloo on CPU), nccl or gloo", choices=("auto", "nccl", "gloo"))

    @classmethod
    def describe(cls, p: dict[str, Any]) -> str:
        size = f" {_human_bytes(p['size'])}" if "size" in p else f" sizes {p['sizes']}"
        return f"{p['nproc']} procs {p.get('backend', 'auto')}{size}"

    def validate(self) -> None:
        super().validate()
        positive("--nproc", self.nproc)
        self.validate_nodes()
        if self.nproc * self.nnodes < 2:
            raise UsageError("a collective needs at least 2 processes: --nproc 2 (or more nodes)")
        for part in self.sizes.split(","):
            parse_size(part)

    def check_environment(self, device_type: str) -> None:
        super().check_environment(device_type)
        check_nproc(self.nproc, device_type, self.nnodes)
        kind = kind_of(device_type)
        if self.backend == "nccl" and kind.dist_backend != "nccl":
            raise UsageError(
                f"the nccl backend needs NVIDIA or AMD GPUs, not {kind.name}; use --backend {kind.dist_backend} "
                "(or auto)"
            )
