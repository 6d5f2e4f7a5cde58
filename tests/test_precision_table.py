"""One precision table: every name a family accepts is in it, and each family reads its dtypes, autocast,
arithmetic, peak key and TF32 mode from it (checked through the accessors the families call)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch

from accelbench.devices import precision as prec
from accelbench.devices.precision import PRECISIONS

#: what the table must say: the maps it replaced (devices/precision.py, kit/step.py, train/loop.py,
#: infer/backends.py, infer/fidelity.py), written out once more so that a change to the table shows here
EXPECTED = {
    # name: (storage, autocast, arithmetic, peak key, tf32, significant bits)
    "fp32": (torch.float32, None, "fp32", "fp32", False, 24),
    "tf32": (torch.float32, None, "tf32", "tf32", True, 24),
    "fp16": (torch.float16, None, "fp16", "fp16", False, 11),
    "bf16": (torch.bfloat16, None, "bf16", "bf16", False, 8),
    "int8": (torch.int8, None, "int8", "int8", False, None),
    "fp8": (torch.float8_e4m3fn, None, "fp8", "fp8", False, 4),
    "amp_fp16": (torch.float32, torch.float16, "fp16", "fp16", False, 11),
    "amp_bf16": (torch.float32, torch.bfloat16, "bf16", "bf16", False, 8),
}


def accepted_precisions() -> dict[str, set[str]]:
    """Every precision name some family accepts, with where it is accepted: the benchmarks' --precision choices,
    the serving backends' precisions, the tta recipes' GPU precision and infer's auto."""
    from accelbench.infer.catalog import BACKENDS
    from accelbench.infer.specs import InferParams
    from accelbench.registry import BENCHMARKS
    from accelbench.tta.recipes import RECIPES, recipe

    where: dict[str, set[str]] = {}
    for name, info in BENCHMARKS.items():
        for f in dataclasses.fields(info.params):
            if f.name == "precision":
                for choice in f.metadata.get("choices") or (f.default,):
                    where.setdefault(choice, set()).add(name)
    for name, cls in BACKENDS.items():
        for p in cls.precisions:
            where.setdefault(p, set()).add(f"infer backend {name}")
    for name in RECIPES:
        where.setdefault(recipe(name).gpu_precision, set()).add(f"tta recipe {name}")
    for backend in ("torch", "int8"):
        where.setdefault(InferParams(backend=backend).effective_precision, set()).add("infer auto")
    where.pop("auto", None)  # resolved before anything reads the table (infer's effective_precision, tta's)
    return where


def test_every_precision_a_family_accepts_is_in_the_table() -> None:
    accepted = accepted_precisions()
    assert {"kernels/gemm", "train/throughput"} <= set().union(*accepted.values())  # the walk found the families
    missing = {p: sorted(w) for p, w in accepted.items() if p not in PRECISIONS}
    assert not missing
    assert set(PRECISIONS) == set(EXPECTED) and set(accepted) <= set(PRECISIONS)
    assert all(name == p.name for name, p in PRECISIONS.items())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_table_says_what_each_precision_was(name: str) -> None:
    storage, autocast, arithmetic, peak, tf32, bits = EXPECTED[name]
    assert prec.torch_dtype(name) == storage
    assert prec.autocast_dtype(name) == autocast
    assert prec.arithmetic_of(name) == arithmetic
    assert prec.peak_key(name) == peak
    assert prec.tf32_math(name) is tf32
    assert prec.significant_bits(name) == bits
    assert prec.model_dtype(name) == (None if storage == torch.float32 else storage)
    if bits is not None:  # the bits are the arithmetic's storage format's
        assert 1 - math.log2(torch.finfo(prec.torch_dtype(arithmetic)).eps) == bits


def test_every_peak_key_is_a_column_of_the_spec_table() -> None:
    from accelbench.system.specs import PRECISION_COLUMNS

    assert {p.peak for p in PRECISIONS.values()} <= set(PRECISION_COLUMNS)


def test_names_outside_the_table_keep_their_old_meaning() -> None:
    """'auto' reaches the math mode before a family resolves it: no TF32, no autocast, no conversion."""
    assert not prec.tf32_math("auto") and prec.autocast_dtype("auto") is None and prec.model_dtype("auto") is None
    assert prec.arithmetic_of("auto") == "auto" and prec.peak_key("fp64") == "fp64"
    with pytest.raises(KeyError):
        prec.torch_dtype("auto")


# -- the families read it ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fp32", "tf32", "amp_fp16", "amp_bf16", "bf16", "fp16"])
def test_training_autocasts_converts_scales_and_judges_as_the_table_says(name: str) -> None:
    from accelbench.kit.step import TrainStep, autocast
    from accelbench.train import loop
    from accelbench.train.specs import TRAIN_PRECISIONS

    assert name in TRAIN_PRECISIONS
    cpu = torch.device("cpu")
    with autocast(cpu, name):
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
    assert dtype == prec.autocast_dtype(name)
    model = torch.nn.Linear(2, 2)
    step = TrainStep(torch.optim.SGD(model.parameters(), lr=0.1), cpu, name)
    assert (step.scaler is not None) is (name == "amp_fp16")  # loss scaling for fp16 autocast only
    assert loop.PEAK_PRECISION[name] == prec.peak_key(name) == EXPECTED[name][3]
    params = SimpleNamespace(precision=name, channels_last=False)
    x, y = loop.as_model_input((torch.zeros(2, 2), torch.zeros(2, dtype=torch.long)), params)  # type: ignore[arg-type]
    assert x.dtype == (prec.model_dtype(name) or torch.float32) and y.dtype == torch.long


@pytest.mark.parametrize("name", ["fp32", "amp_fp16", "amp_bf16", "bf16", "fp16"])
def test_serving_autocasts_and_converts_as_the_table_says(name: str) -> None:
    from accelbench.infer.backends import TorchEager

    class Served:
        def forward(self, model, inputs):  # type: ignore[no-untyped-def]
            assert torch.get_autocast_dtype("cpu") == prec.autocast_dtype(name) or not torch.is_autocast_enabled("cpu")
            return model(*inputs)

    assert name in TorchEager.precisions
    model = torch.nn.Linear(2, 2)
    predict = TorchEager().load(Served(), model, torch.device("cpu"), name, [])
    out = predict((torch.ones(1, 2),))
    weights = prec.model_dtype(name) or prec.autocast_dtype(name) or torch.float32  # amp_*: stored once cast
    assert model.weight.dtype == weights
    assert out.dtype == (prec.autocast_dtype(name) or prec.model_dtype(name) or torch.float32)


def test_the_rounded_twin_rounds_to_the_tables_bits() -> None:
    from accelbench.measure import rounding

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    x = torch.randn(4, 8)
    assert rounding.rounded_copy(model, "fp32") is None and rounding.rounded_copy(model, "tf32") is None
    with torch.no_grad():
        for amp, plain in (("amp_fp16", "fp16"), ("amp_bf16", "bf16")):  # autocast rounds as its arithmetic does
            assert torch.equal(rounding.rounded_copy(model, amp)(x), rounding.rounded_copy(model, plain)(x))
        twin = rounding.rounded_copy(model, "bf16")
        assert torch.equal(twin[0].weight, model[0].weight.to(torch.bfloat16).float())


def test_the_peak_lookup_reads_the_tables_column(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.devices import kind
    from accelbench.system import specs

    columns = {c: float(i + 1) for i, c in enumerate(specs.PRECISION_COLUMNS)}
    spec = SimpleNamespace(peaks=columns, name="Fake", source="test", derived=())
    monkeypatch.setattr(kind, "kind_of", lambda d: SimpleNamespace(accelerator=True, label=lambda d: "Fake"))
    monkeypatch.setattr(specs, "find_spec", lambda label: spec)
    for name in PRECISIONS:
        peak = specs.peak_for(torch.device("cpu"), name)
        assert peak is not None and peak.tflops == columns[prec.peak_key(name)]


def test_the_cpu_estimate_is_asked_for_the_peak_key_and_never_for_tf32(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.system import cpu, specs

    asked: list[str] = []
    monkeypatch.setattr(cpu, "estimated_peak_tflops", lambda p, cores: asked.append(p) or (1.0, "test"))
    for name in PRECISIONS:
        peak = specs.peak_for(torch.device("cpu"), name, threads=1)
        assert (peak is None) is prec.tf32_math(name)
    assert asked == [prec.peak_key(n) for n in PRECISIONS if not prec.tf32_math(n)]


@pytest.mark.parametrize("name", [*sorted(PRECISIONS), "auto"])
def test_tf32_math_is_on_exactly_for_tf32(name: str) -> None:
    allowed = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = name != "tf32"
        mode = prec.set_numeric_mode(torch.device("cpu"), name)
        on = name == "tf32"
        assert mode["tf32"] is on and prec.tf32_math(name) is on
        assert torch.backends.cuda.matmul.allow_tf32 is on and torch.backends.cudnn.allow_tf32 is on
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = allowed
