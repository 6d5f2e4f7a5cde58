"""The accuracy gate judges the precision, not the weights: a trained network and random weights alike pass a
correct bf16 path and fail a broken one (weights truncated to 4 bits), with labels (accuracy) and without
(fidelity to FP32)."""

import numpy as np
import pytest
import torch
from infer_fixtures import DigitsNet, train_digits, write_digits

from accelbench.infer import fidelity as fid
from accelbench.measure import rounding

DIGITS = {
    "model": "infer_fixtures:DigitsNet",
    "threads": 2,
    "batch_size": 16,
    "device": "cpu",
    "mode": "accuracy",
    "precision": "bf16",
    "emulated": True,  # accuracy, not speed: bf16 is judged on hosts that only emulate it too
}
BROKEN = "infer_fixtures:FourBitWeights"


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """scikit-learn's handwritten digits, a held-out ImageFolder and a DigitsNet trained here on the rest."""
    pytest.importorskip("sklearn")
    root = tmp_path_factory.mktemp("digits")
    train, val = write_digits(root)
    return val, train_digits(train, root / "digits.pt", epochs=3)  # 97% held out: trained, in a third of the steps


def test_a_trained_model_keeps_its_accuracy_in_bf16_and_loses_it_with_four_bit_weights(run_isolated, digits):
    val, checkpoint = digits
    params = {**DIGITS, "dataset": str(val), "checkpoint": str(checkpoint)}
    [ok] = run_isolated(params)
    assert ok.status == "ok" and ok.valid is True, (ok.error, ok.warnings)
    assert ok.metrics["reference_top1"].value >= 0.9, "the fixture's network did not learn the digits"
    assert ok.details["accuracy_verified"] is True and ok.details["gate"].startswith("accuracy verified")

    [bad] = run_isolated({**params, "backend": BROKEN})
    assert bad.status == "ok" and bad.valid is False, bad.warnings
    assert bad.metrics["top1"].value < 0.99 * bad.metrics["reference_top1"].value
    assert any("below 99% of the FP32 reference" in w for w in bad.warnings)


@pytest.mark.parametrize("weights", ["trained", "random"])
def test_without_labels_fidelity_passes_bf16_and_fails_four_bit_weights(run_isolated, digits, weights):
    params = dict(DIGITS) | ({"checkpoint": str(digits[1])} if weights == "trained" else {})
    [ok] = run_isolated(params)
    assert ok.status == "ok" and ok.valid is True, (ok.error, ok.warnings)
    f = ok.details["fidelity"]
    assert f["precision"] == "bf16" and f["rounding"] > 0 and f["deviation"] <= f["limit"] < f["coarser"]
    assert ok.details["accuracy_verified"] is False and "accuracy not verified" in ok.details["gate"]
    assert ok.details["accuracy_gates"] == {"fidelity": True}

    [bad] = run_isolated({**params, "backend": BROKEN})
    assert bad.status == "ok" and bad.valid is False, bad.warnings
    assert bad.details["fidelity"]["deviation"] > bad.details["fidelity"]["limit"]
    assert any(w.startswith("INVALID: strays from FP32 beyond bf16 rounding") for w in bad.warnings)


def test_fp32_candidates_are_still_judged_on_agreement(run_isolated):
    """Nothing rounds in fp32: another runtime or layout must give the same answers (no fidelity figure)."""
    [r] = run_isolated({**DIGITS, "precision": "fp32"})
    assert r.status == "ok" and r.valid is True and "fidelity" not in r.details, r.warnings
    assert r.metrics["fp32_agreement"].value == 1.0


def test_the_rounded_twin_rounds_as_the_precision_does():
    torch.manual_seed(0)
    model = DigitsNet().build("full").eval()
    assert rounding.rounded_copy(model, "fp32") is None and rounding.rounded_copy(model, "tf32") is None
    x = torch.randn(8, 3, 32, 32)
    with torch.no_grad():
        exact = model(x)
        bf16 = rounding.rounded_copy(model, "amp_bf16")(x)  # autocast's arithmetic is bf16's
        fp16 = rounding.rounded_copy(model, "fp16")(x)
        int8 = rounding.rounded_copy(model, "int8")(x)
        coarse = {p: rounding.rounded_copy(model, p, coarser=rounding.COARSER_BITS)(x) for p in ("bf16", "int8")}
    assert model[0].weight.dtype == torch.float32 and torch.equal(model(x), exact), "the model itself was changed"
    moved = {name: float((out - exact).abs().max()) for name, out in [("bf16", bf16), ("fp16", fp16), ("int8", int8)]}
    assert 0 < moved["fp16"] < moved["bf16"], moved  # 11 significant bits against 8
    for p in ("bf16", "int8"):
        assert float((coarse[p] - exact).abs().max()) > 2 * moved[p], p


def test_significant_bits_round_as_the_dtype_does():
    t = torch.randn(10000) * 100
    assert torch.equal(rounding.significant(t, 8), t.to(torch.bfloat16).float()) or (
        (rounding.significant(t, 8) != t.to(torch.bfloat16).float()).sum() <= 2  # ties: away from zero, not to even
    )
    five = rounding.significant(t, 5)
    assert float(((five - t).abs() / t.abs()).max()) <= 2**-5 + 1e-7


def test_eight_bit_quantization_rounds_to_half_a_step():
    t = torch.linspace(-3, 5, 1001)
    sym = rounding.quantize(t, None, symmetric=True)
    assert float((sym - t).abs().max()) <= 5 / 127 / 2 + 1e-6 and len(torch.unique(sym)) <= 255
    asym = rounding.quantize(t, None, symmetric=False)
    assert float((asym - t).abs().max()) <= 8 / 255 / 2 + 1e-6
    w = torch.stack([torch.linspace(-1, 1, 50), torch.linspace(-100, 100, 50)])
    per_row = rounding.quantize(w, 0, symmetric=True)  # each output channel its own scale
    assert float((per_row[0] - w[0]).abs().max()) <= 1 / 127 / 2 + 1e-6


def test_the_verdict_needs_closeness_and_kept_decisions():
    close = fid.Fidelity("bf16", deviation=0.03, rounding=0.02, coarser=0.3, decided=40, decided_agreement=1.0)
    assert close.limit == pytest.approx(rounding.HEADROOM * 0.02) and close.passed and close.informative is None
    assert "1.50x what rounding to bf16" in close.describe()
    # measured on a random ResNet-50: weights truncated to 4 bits moved the logits 4.1x int8's rounding
    assert not fid.Fidelity("int8", 1.47, 0.355, 11.3, 0, None).passed
    assert fid.Fidelity("int8", 0.354, 0.355, 11.3, 0, None).passed  # ONNX Runtime's INT8
    assert not fid.Fidelity("bf16", 0.03, 0.02, 0.3, 40, 0.95).passed  # confident answers flipped
    untestable = fid.Fidelity("bf16", 0.03, 0.02, 0.3, 3, None)
    assert untestable.passed and "too few to test agreement" in untestable.describe()


def test_outputs_that_saturate_cannot_judge():
    """Where rounding four bits coarser hardly moves the outputs further, a broken path could pass unseen."""
    saturated = fid.Fidelity("int8", deviation=0.3, rounding=0.3, coarser=0.5, decided=0, decided_agreement=None)
    assert "fidelity cannot be judged on these weights" in saturated.informative


def test_rows_and_margins():
    out = torch.tensor([[0.0, 3.0, 1.0], [2.0, 2.5, -1.0]])
    rows = fid.rows(out)
    assert [r.tolist() for r in rows] == [[0.0, 3.0, 1.0], [2.0, 2.5, -1.0]]
    assert np.allclose(fid.margins(rows), [2.0, 0.5])
    volume = fid.rows(torch.zeros(2, 3, 40, 40, 40))
    assert len(volume) == 2 and volume[0].size <= 2 * fid.KEEP  # strided down, not kept whole
    assert fid.rows([{"boxes": torch.zeros(1, 4)}]) is None  # a detector's answers have no rows
