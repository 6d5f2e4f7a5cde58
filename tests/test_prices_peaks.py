"""Prices that match the hardware, electricity never dropped silently, and a CPU peak per microarchitecture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from accelbench.cost import match, price
from accelbench.errors import UsageError
from accelbench.results.record import Metric, Result
from accelbench.system import cpu

H100 = ("NVIDIA H100 80GB HBM3", 85_520_809_984)
A100_40 = ("NVIDIA A100-SXM4-40GB", 42_505_273_344)

# /proc/cpuinfo's first processor block, as each CPU reports it (the facts a fake stands in for)
ZEN4 = {
    "vendor_id": "AuthenticAMD",
    "cpu family": "25",
    "model": "17",
    "model name": "AMD EPYC 9654 96-Core Processor",
    "flags": "fpu sse4_2 avx avx2 fma f16c avx512f avx512dq avx512bw avx512vl avx512_bf16 avx512_vnni",
}
ZEN5 = ZEN4 | {"cpu family": "26", "model": "2", "model name": "AMD EPYC 9755 128-Core Processor"}
ZEN5_DESKTOP = ZEN5 | {"model": "68", "model name": "AMD Ryzen 9 9950X 16-Core Processor"}
ZEN5_MOBILE = ZEN5 | {"model": "36", "model name": "AMD Ryzen AI 9 HX 370 w/ Radeon 890M"}
SAPPHIRE_RAPIDS = {
    "vendor_id": "GenuineIntel",
    "cpu family": "6",
    "model": "143",
    "model name": "Intel(R) Xeon(R) Platinum 8480+",
    "flags": "sse4_2 avx avx2 fma f16c avx512f avx512_bf16 avx512_fp16 avx512_vnni avx_vnni amx_bf16 amx_int8 amx_tile",
}
SKYLAKE_SILVER = SAPPHIRE_RAPIDS | {
    "model": "85",
    "model name": "Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz",
    "flags": "sse4_2 avx avx2 fma avx512f avx512dq",
}
SKYLAKE_GOLD6 = SKYLAKE_SILVER | {"model name": "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"}


def _per_cycle(info: dict[str, str], precision: str = "fp32") -> tuple[int, str] | None:
    return cpu.flops_per_cycle(precision, info["flags"].split(), cpu.cpu_identity(info))


# --- prices against the hardware -------------------------------------------------------------------------


def test_an_instance_is_checked_against_the_chip_its_memory_and_its_count() -> None:
    p5 = price.instance_row("p5.48xlarge")
    p4de = price.instance_row("p4de.24xlarge")
    assert p5 is not None and p4de is not None
    assert match.mismatch(p5, match.Measured("cuda", (H100,) * 8)) is None  # what the table prices
    on_cpu = match.mismatch(p5, match.Measured("cpu"))
    assert on_cpu is not None and "8x H100 SXM5 80GB" in on_cpu and "measures the CPU" in on_cpu
    one = match.mismatch(p5, match.Measured("cuda", (H100,)))
    assert one is not None and "1 visible" in one  # one H100 is not priced as eight
    chip = match.mismatch(p5, match.Measured("cuda", (A100_40,) * 8))
    assert chip is not None and "8x NVIDIA A100-SXM4-40GB" in chip
    memory = match.mismatch(p4de, match.Measured("cuda", (A100_40,) * 8))  # p4de is the 80 GB A100
    assert memory is not None and "reports 40 GiB" in memory
    assert match.mismatch(price.instance_row("p4d.24xlarge"), match.Measured("cuda", (A100_40,) * 8)) is None


def test_a_mismatch_is_refused_or_kept_with_a_label() -> None:
    p = price.from_options(instance_name="p5.48xlarge")
    with pytest.raises(UsageError, match=r"--instance p5.48xlarge does not price .* --price-mismatch-ok"):
        match.checked(p, match.Measured("cpu"))
    kept = match.checked(p, match.Measured("cpu"), ok=True)
    assert kept is not None and "measures the CPU" in kept.mismatch
    assert kept.to_dict()["mismatch"] == kept.mismatch and any("--price-mismatch-ok" in n for n in kept.notes)
    assert price.Price.from_dict(kept.to_dict()).mismatch == kept.mismatch  # survives the store
    configured = price.from_options(config={"instance": "p5.48xlarge"}, config_where="/x/config.toml")
    with pytest.raises(UsageError, match=r'^instance = "p5.48xlarge" in /x/config.toml does not price'):
        match.checked(configured, match.Measured("cpu"))
    stated = price.from_options(price_per_hour=3.0)
    assert match.checked(stated, match.Measured("cpu")) is stated  # a stated price names no hardware


def test_an_instance_on_this_cpu_run_is_one_line_exit_2(tmp_path: Path, cli_env) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("the CPU-only refusal needs a machine without a GPU")
    db = tmp_path / "s.db"
    out = run_cli(
        ["kernels", "gemm", "--m", "8", "--n", "8", "--k", "8", "--db", str(db), "--instance", "p5.48xlarge"],
        cli_env,
        tmp_path,
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "8x H100 SXM5 80GB; this run measures the CPU" in out.stderr
    assert not db.exists()  # refused before anything was opened or measured
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('instance = "p5.48xlarge"\n')
    configured = run_cli(["kernels", "gemm", "--m", "8", "--n", "8", "--k", "8"], cli_env, tmp_path)
    assert configured.returncode == 2 and 'instance = "p5.48xlarge" in ' in configured.stderr
    stray = run_cli(["kernels", "gemm", "--m", "8", "--price-per-hour", "2", "--price-mismatch-ok"], cli_env, tmp_path)
    assert stray.returncode == 2 and "--price-mismatch-ok applies to an instance" in stray.stderr


_SLEEP = ["infer", "resnet18", "--backend", "sleep", "--service-ms", "1", "--scale", "tiny", "--duration", "0.3"]


def test_a_config_price_is_said_once_and_never_priced_on_a_kernel(tmp_path: Path, cli_env) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text("price_per_hour = 2.5\n")
    out = run_cli(["kernels", "gemm", "--m", "64", "--n", "64", "--k", "64", "--json"], cli_env, tmp_path)
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if line.startswith("price: 2.5 USD/h")]
    assert len(said) == 1 and "config.toml" in said[0] and "kernels are not priced" in out.stderr
    [kernel] = json.loads(out.stdout)["results"]
    assert "price" not in kernel["system"] and "usd_per_million" not in kernel["metrics"]
    served = run_cli([*_SLEEP, "--json"], cli_env, tmp_path)
    assert served.returncode == 0, served.stderr
    [r] = json.loads(served.stdout)["results"]
    assert r["system"]["price"]["usd_per_hour"] == 2.5 and r["system"]["price"]["origin"].endswith("config.toml")
    assert r["metrics"]["usd_per_million"]["value"] > 0
    assert sum(line.startswith("price: 2.5 USD/h") for line in served.stderr.splitlines()) == 1


def test_a_mismatched_instance_kept_on_purpose_is_in_the_record(tmp_path: Path, cli_env) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CPU-only machine's mismatch")
    out = run_cli([*_SLEEP, "--instance", "p5.48xlarge", "--price-mismatch-ok", "--json"], cli_env, tmp_path)
    assert out.returncode == 0, out.stderr
    [r] = json.loads(out.stdout)["results"]
    assert "this run measures the CPU" in r["system"]["price"]["mismatch"]
    assert "priced anyway (--price-mismatch-ok)" in out.stderr


def test_dropped_electricity_is_said_in_the_terminal_and_the_report(tmp_path: Path, cli_env) -> None:
    from accelbench.measure.energy import readable
    from accelbench.report.common import cost

    owned = price.from_options(purchase_price=8760, amortize_years=1, power_cost_kwh=0.2)
    assert owned is not None and owned.electricity_dropped
    assert any("electricity not priced" in line for line in match.describe(owned, readable=()))
    assert not any("electricity" in line for line in match.describe(owned, readable=("cpu",)))
    stated = price.from_options(purchase_price=8760, amortize_years=1, power_cost_kwh=0.2, board_watts=500)
    assert stated is not None and not stated.electricity_dropped

    record = Result(
        "train/throughput",
        {},
        metrics={"usd_per_million": Metric(value=10.4, unit="USD per 1M images", higher_is_better=False)},
        system={"fingerprint": "f", "profile": {}, "price": owned.at_power(None).to_dict()},
    )
    assert "electricity not included" in cost(record)
    record.system["price"] = owned.at_power(100.0).to_dict()  # measured in the window: included, nothing said
    assert "electricity" not in cost(record)

    if any(state.startswith("readable") for state in readable().values()):
        return  # counters here: the electricity is priced where measured
    out = run_cli(
        ["kernels", "gemm", "--m", "64", "--n", "64", "--k", "64", "--purchase-price", "8760"]
        + ["--amortize-years", "1", "--power-cost-kwh", "0.2", "--json"],
        cli_env,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "electricity not priced" in out.stderr and "--board-watts" in out.stderr


# --- the CPU's peak --------------------------------------------------------------------------------------


def test_zen4_counts_its_256_bit_pipes_and_zen5_its_512_bit_ones() -> None:
    per_cycle, how = _per_cycle(ZEN4)
    assert per_cycle == 32  # like Zen 3: 512-bit FMAs run as two halves
    assert how.startswith("Zen 4: 2 FMA units x 256 bits") and "57647" in how and "two 256-bit halves" in how
    assert _per_cycle(ZEN4, "fp64")[0] == 16 and _per_cycle(ZEN4, "bf16")[0] == 64
    assert _per_cycle(ZEN4, "int8")[0] == 128  # VNNI: four products per 32-bit lane, on the same pipes
    for server_or_desktop in (ZEN5, ZEN5_DESKTOP):
        rate, how = _per_cycle(server_or_desktop)
        assert rate == 64 and how.startswith("Zen 5: 2 FMA units x 512 bits") and "58455" in how
    assert _per_cycle(ZEN5_MOBILE)[0] == 32  # Strix Point keeps a 256-bit datapath


def test_intel_server_cores_by_their_fma_units() -> None:
    rate, how = _per_cycle(SAPPHIRE_RAPIDS)
    assert rate == 64 and "Sapphire" in how and "ARK" in how
    assert _per_cycle(SAPPHIRE_RAPIDS, "bf16") == (1024, cpu._AMX_SOURCE)
    assert _per_cycle(SAPPHIRE_RAPIDS, "fp16")[0] == 128  # avx512_fp16, no amx_fp16 on this generation
    assert _per_cycle(SKYLAKE_GOLD6)[0] == 64 and _per_cycle(SKYLAKE_SILVER)[0] == 32  # 2 vs 1 FMA unit
    unknown = SKYLAKE_SILVER | {"model name": "Intel Xeon Processor (Skylake, IBRS)"}  # a VM's generic name
    rate, how = _per_cycle(unknown)
    assert rate == 64 and "upper bound" in how  # never an unsourced guess called a fact


def test_no_peak_for_a_precision_the_cpu_only_emulates() -> None:
    assert _per_cycle(ZEN4, "fp16") is None  # no avx512_fp16, no amx_fp16
    no_bf16 = ZEN4 | {"flags": "avx avx2 fma avx512f"}
    assert _per_cycle(no_bf16, "bf16") is None and _per_cycle(no_bf16, "int8") is None
    zen3 = {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "1", "flags": "avx avx2 fma"}
    assert _per_cycle(zen3)[0] == 32 and _per_cycle(zen3, "bf16") is None
    hidden = ZEN5 | {"flags": "avx avx2 fma"}  # a hypervisor that hides AVX-512: only 256-bit code runs
    assert _per_cycle(hidden)[0] == 32


def test_the_peak_of_a_zen4_names_its_rule(monkeypatch) -> None:
    import torch

    from accelbench.system import specs
    from accelbench.system.clock import TimedClock

    monkeypatch.setattr("accelbench.devices.host.cpuinfo", lambda: ZEN4)
    monkeypatch.setattr(cpu, "cpu_clock_ghz", lambda: 2.5)
    monkeypatch.setattr("accelbench.system.clock.timed_clock", lambda: TimedClock(None, "not timed (test)"))
    peak = specs.peak_for(torch.device("cpu"), "fp32", threads=2)
    assert peak is not None and peak.estimated
    assert peak.tflops == pytest.approx(2 * 2.5e9 * 32 / 1e12)
    assert "x 32 FLOP/cycle (Zen 4" in peak.source and "57647" in peak.source
    assert "2.50 GHz reported (not timed (test))" in peak.source  # the clock behind the peak, and how it was found
    assert specs.peak_for(torch.device("cpu"), "fp16", threads=2) is None


# --- requests in flight are not devices ------------------------------------------------------------------


def test_requests_in_flight_on_a_cpu_are_streams_not_devices(tmp_path: Path, cli_env) -> None:
    from accelbench.infer.specs import InferParams

    p = InferParams(backend="openvino", streams=4)
    assert p.workers == 4 and p.nproc == 1  # four requests, one device: per-device figures are the CPU's
    assert "x4 in flight" in InferParams.describe(p.to_dict()) and "devices" not in InferParams.describe(p.to_dict())
    with pytest.raises(UsageError, match=r"--nproc 2 would record 2 devices .* give --streams 2"):
        InferParams(backend="sleep", nproc=2).check_environment("cpu")
    with pytest.raises(UsageError, match="--streams"):
        InferParams(streams=0).validate()
    out = run_cli([*_SLEEP, "--device", "cpu", "--nproc", "2"], cli_env, tmp_path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "--streams 2" in out.stderr


def test_openvino_counts_its_requests_in_flight() -> None:
    pytest.importorskip("openvino")
    import torch

    from accelbench.infer.openvino import OpenVino
    from accelbench.infer.served import served

    spec = served("resnet18", "tiny")
    model = spec.build().eval()
    batch = spec.collate([spec.synthetic(i, torch.device("cpu")) for i in range(2)])
    impl = OpenVino()
    for _ in range(2):  # two workers on the one CPU: two requests, one compiled model
        impl.load(spec, model, torch.device("cpu"), "fp32", [batch])
    assert impl.facts["requests_in_flight"] == 2 and impl.facts["streams"] >= 1
