import torch

from accelbench.system.cpu import flops_per_cycle
from accelbench.system.profile import collect_profile, fingerprint
from accelbench.system.specs import find_spec, load_specs, peak_for


def test_profile_has_the_documented_keys(profile):
    for section, key in [
        ("cpu", "model"),
        ("cpu", "physical_cores"),
        ("cpu", "logical_cores"),
        ("cpu", "flags"),
        ("memory", "total_bytes"),
        ("os", "name"),
        ("os", "kernel"),
        ("python", "version"),
        ("torch", "version"),
        ("torch", "cuda"),
        ("torch", "cudnn"),
        ("torch", "nccl"),
    ]:
        assert key in profile[section], (section, key)
    assert isinstance(profile["accelerators"], list)
    assert profile["memory"]["total_bytes"] > 2**30
    if not torch.cuda.is_available():
        assert profile["torch"]["cuda"] is None and profile["accelerators"] == []


def test_fingerprint_is_stable_and_sensitive(profile):
    assert collect_profile()["fingerprint"] == profile["fingerprint"]
    other = {**profile, "torch": {**profile["torch"], "version": "0.0.1"}}
    assert fingerprint(other) != profile["fingerprint"]


def test_spec_table_matches_the_names_torch_reports():
    expected = {
        "Tesla T4": "NVIDIA T4",
        "Tesla V100-PCIE-16GB": "NVIDIA V100 PCIe",
        "Tesla V100-SXM2-32GB": "NVIDIA V100 SXM2",
        "NVIDIA A100-SXM4-40GB": "NVIDIA A100 SXM4 40GB",
        "NVIDIA A100 80GB PCIe": "NVIDIA A100 PCIe 80GB",
        "NVIDIA A10": "NVIDIA A10",
        "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM",
        "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
        "Quadro RTX 8000": "NVIDIA Quadro RTX 8000",
        "NVIDIA L4": "NVIDIA L4",
    }
    for reported, row in expected.items():
        spec = find_spec(reported)
        assert spec is not None and spec.name == row, reported
    assert find_spec("NVIDIA A10G") is None  # a different part: no silent mismatch
    assert all(s.source for s in load_specs())
    t4 = find_spec("Tesla T4")
    assert t4.peaks["fp16"] == 65 and "bf16" not in t4.peaks and "tf32" not in t4.peaks


def test_cpu_peak_is_an_estimate_from_the_isa():
    assert flops_per_cycle("fp32", ["avx2", "fma", "avx512f"])[0] == 64
    assert flops_per_cycle("fp32", ["avx2", "fma"])[0] == 32
    assert flops_per_cycle("bf16", ["avx512f", "amx_bf16"])[0] == 1024
    peak = peak_for(torch.device("cpu"), "fp32", threads=1)
    if peak is not None:
        assert peak.estimated and "estimate" in peak.source and peak.tflops > 0
    assert peak_for(torch.device("cpu"), "tf32") is None


def test_nvml_throttle_bits_decode_to_slowdowns_only():
    from accelbench.system.nvidia import clocks_and_throttle, decode_throttle

    assert decode_throttle(0x1 | 0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_throttle(0x1) == []  # idle is not a slowdown
    if not torch.cuda.is_available():
        assert clocks_and_throttle(0) == {}


def test_the_cpu_peak_rests_on_a_clock_that_holds() -> None:
    """A core's clock timed by two dependent chains (register adds, imuls) that agree: the peak is not beaten by
    a boosting core. The chains are timed interleaved, the fastest run of each kept, so a busy host slows some
    runs of both and spoils neither figure."""
    import platform

    from accelbench.system.clock import measure_clock, timed_clock
    from accelbench.system.cpu import cpu_clock_ghz, estimated_peak_tflops

    timed = measure_clock()
    if platform.machine() == "x86_64" and platform.system() == "Linux":
        assert timed.ghz is not None and 0.4 <= timed.ghz <= 7.0, timed.how
        assert "register-add chain" in timed.how and "imul chain" in timed.how and "agree" in timed.how
        reported = cpu_clock_ghz()
        if reported:
            assert timed.ghz > 0.5 * reported  # the same order as the OS's own figure
    peak = estimated_peak_tflops("fp32", 2)
    assert peak is not None
    tflops, how = peak
    assert timed_clock().how in how  # the record says how the clock behind the peak was found
    if timed.ghz:
        assert tflops >= 2 * timed.ghz * 1e9 * 8 / 1e12 * 0.9  # never far below what the timed clock allows
