"""Published LLM training tokens/s (torchtitan's benchmarks on H100 and H200, NeMo 24.07's performance summary)
and a decoder's training record beside them: each row names the file it was read from and its date, the figure
stays per GPU as published, and ``compare --reference`` gives a ratio only where model, precision and sequence
length agree (full scale, full training of the whole model), with what else differs said."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.reference.match import beside, closest, matches
from accelbench.reference.table import Reference, references, select
from accelbench.results.record import Metric, Result
from accelbench.results.store import RunInfo, Store

SYSTEM = {"fingerprint": "f00d", "profile": {"torch": {"version": "2.5.1+cu124"}}}
#: a row's source: a file of a public repository at a commit, and the section of it the table is under
SOURCE = re.compile(r"^(?P<repo>pytorch/torchtitan|NVIDIA/NeMo)@[0-9a-f]{12}:(?P<path>\S+\.md)#(results|pretraining)$")
#: torchtitan's bf16 rows of Llama 3.1 8B at 8192 tokens (Tables 1 and 3: eager and torch.compile, 8 and 128 GPUs)
TORCHTITAN_BF16_8B = {5762.0, 6667.0, 5605.0, 6514.0}


def _rows() -> list[Reference]:
    return [r for r in references() if r.task == "train_throughput" and r.unit.startswith("tokens/s")]


def trained(
    *,
    precision: str = "amp_bf16",
    seq_len: int = 8192,
    nproc: int = 1,
    per_device: float = 7000.0,
    scale: str = "full",
    **params: object,
) -> Result:
    """A llama3.1-8b record as ``accelbench train llama3.1-8b`` writes one on an H100: tokens/s for the whole
    run and per device, MFU by both conventions."""
    total = per_device * nproc
    metrics = {
        "throughput": Metric(value=total, unit="tokens/s", higher_is_better=True),
        "throughput_per_device": Metric(value=per_device, unit="tokens/s", higher_is_better=True),
        "mfu": Metric(value=40.0, unit="%", higher_is_better=True),
        "mfu_causal": Metric(value=35.0, unit="%", higher_is_better=True),
    }
    record = {
        "model": "llama3.1-8b", "scale": scale, "precision": precision, "seq_len": seq_len, "nproc": nproc,
        "nnodes": 1, "batch_size": 1, "global_batch_size": nproc, "sharding": "fsdp" if nproc > 1 else "none",
        "lora": 0, "layers": 0, "activation_checkpointing": "none", "compile": False, "data": "synthetic",
        "device": "cuda:0",
    } | params  # fmt: skip
    system = json.loads(json.dumps(SYSTEM)) | {"accelerators": [{"name": "NVIDIA H100 80GB HBM3"}]}
    return Result("train/llm", record, metrics=metrics, primary_metric="throughput", system=system)


def test_the_rows_load_each_with_its_file_date_and_a_figure_per_gpu() -> None:
    rows = _rows()
    assert 10 <= len(rows) <= 15
    assert {r.model for r in rows} == {"llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "llama2-70b"}
    for r in rows:
        m = SOURCE.match(r.source_ref)
        assert m, r.source_ref
        assert m["path"].startswith("benchmarks/" if m["repo"] == "pytorch/torchtitan" else "docs/source/performance/")
        assert r.source and re.fullmatch(r"\d{4}-\d{2}-\d{2}", r.published)
        assert r.metric == "throughput_per_device" and r.unit == "tokens/s per device" and r.is_per_device
        assert r.per_device == r.value > 0 and r.devices and r.devices >= 8
        assert r.precision in {"bf16", "fp8"} and r.seq_len in {4096, 8192, 32768} and r.parallelism
        assert f"{r.value:,.0f}" in r.notes  # the figure as its table prints it, per GPU
        assert f"{r.seq_len}-token sequences" in r.data
    # the torchtitan team's tables, the community H200 file, NeMo 24.07: dated by the commit that published each
    assert {r.published for r in rows} == {"2025-01-30", "2025-07-11", "2024-09-09"}
    # the sequence length of Tables 1, 3, 4 and 5 is not printed in the table: the notes say where it was read
    table1 = [r for r in rows if r.notes.startswith("Table 1 ")]
    where = "seq_len of train_configs/llama3_8b.toml at torchtitan 9dec370"
    assert len(table1) == 3 and all(where in r.notes for r in table1)
    # NeMo's Llama 3 names are kept beside the accelbench name they are matched as
    assert {r.benchmark for r in rows if r.source.startswith("NVIDIA NeMo")} == {"LLAMA3-8B", "LLAMA3-70B", ""}


def test_a_bf16_record_at_8192_on_an_h100_meets_torchtitan_bf16_rows_per_device() -> None:
    found = closest(matches(trained()))
    assert {m.reference.model for m in found} == {"llama3.1-8b"}
    like = [m for m in found if m.like]
    assert {m.reference.value for m in like} == TORCHTITAN_BF16_8B
    assert found[: len(like)] == like  # like rows first
    for m in like:
        ref = m.reference
        assert ref.source_ref.startswith("pytorch/torchtitan@") and ref.precision == "bf16" and ref.seq_len == 8192
        # per GPU on both sides: the record's tokens/s per device over the published TPS/GPU
        assert m.ratio == pytest.approx(7000.0 / ref.value) and m.ratio_per_device == pytest.approx(m.ratio)
        said = m.comparable
        assert said.startswith("torchtitan 9dec370") and "vs PyTorch 2.5.1 eager" in said
        assert "micro-batch 2 vs 1 sequences per device" in said
        assert "selective vs none activation checkpointing" in said
        assert f"FSDP {ref.count} published vs one device here, {ref.count} vs 1 device(s)" in said
        assert "real vs synthetic data" in said
    # every fp8 row is set aside for its precision; Table 2's 32768-token row for its length too
    for m in found[len(like) :]:
        assert m.ratio is None and m.ratio_per_device is None
        assert m.unlike[0] == "precision differs (fp8 published, amp_bf16 here)"
    long = next(m for m in found if m.reference.seq_len == 32768)
    assert long.unlike[1] == "sequence length differs (32768 published, 8192 here)"


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (trained(seq_len=2048), "sequence length differs (8192 published, 2048 here)"),
        (trained(precision="fp32"), "precision differs (bf16 published, fp32 here)"),
        (trained(lora=16), "LoRA rank 16 here, every weight trained there"),
        (trained(layers=4), "4 decoder layers built here, the whole model there"),
        (trained(scale="tiny", seq_len=128), "tiny model"),
    ],
)
def test_other_work_is_set_aside_with_the_reason(record: Result, reason: str) -> None:
    found = matches(record)
    assert found and not any(m.like for m in found)
    bf16 = [m for m in found if m.reference.value in TORCHTITAN_BF16_8B]
    assert len(bf16) == 4
    for m in bf16:
        assert reason in m.unlike and m.ratio is None and m.ratio_text.startswith("n/a: ")


def test_an_fp8_record_on_eight_gpus_meets_the_fp8_rows_at_its_length() -> None:
    record = trained(precision="fp8", nproc=8, per_device=9000.0, batch_size=2, activation_checkpointing="selective")
    like = [m for m in matches(record) if m.like]
    assert {(m.reference.accelerator, m.reference.count, m.reference.value) for m in like} == {
        ("NVIDIA H100 96GB HBM2e (500 W)", "8", 8532.0),
        ("NVIDIA H100 96GB HBM2e (500 W)", "128", 8380.0),
        ("NVIDIA H200", "32", 10938.0),
        ("NVIDIA H200", "64", 10753.0),
        ("NVIDIA H100 (DGX H100)", "8", 12273.0),
    }
    same = next(m for m in like if m.reference.value == 8532.0)
    assert same.ratio == pytest.approx(9000.0 / 8532.0)
    # the same micro-batch, checkpointing, sharding and devices: only the framework and the data differ
    assert same.differences == (
        "torchtitan 9dec370, PyTorch nightly 1963fc8 (2024-12-23), torch.compile vs PyTorch 2.5.1 eager",
        "real vs synthetic data",
    )
    nemo = next(m for m in like if m.reference.benchmark == "LLAMA3-8B")
    assert "published as LLAMA3-8B" in nemo.differences and "data not stated there" in nemo.differences
    assert "TP 1, PP 1, CP 2, VP 1 published vs FSDP 8 here" in nemo.differences
    assert "activation checkpointing not stated there (here selective)" in nemo.differences


def test_another_model_meets_only_its_own_rows() -> None:
    llama2 = trained(model="llama2-70b", precision="fp8", seq_len=4096, nproc=8)
    found = matches(llama2)
    assert [m.reference.value for m in found] == [1728.0] and found[0].like
    row = next(r for r in select(model="llama3.1-70b", task="train_throughput") if r.value == 829.0)
    crossed = beside(trained(precision="fp8"), row)
    assert crossed is not None and crossed.unlike == ("model differs (llama3.1-70b published, llama3.1-8b here)",)


def test_the_listing_and_compare_reference_show_them(tmp_path: Path, capsys) -> None:
    assert main(["reference", "--model", "llama3.1-8b", "--task", "train_throughput", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 10 and all(r["per_device"] == r["value"] and r["seq_len"] for r in rows)
    assert main(["reference", "--model", "llama3.1-8b", "--task", "train_throughput"]) == 0
    out = capsys.readouterr().out
    assert "5,762 tokens/s per device" in out and "8192-token" in out and "NVIDIA H200" in out
    db = tmp_path / "s.db"
    record = trained(seq_len=2048)
    record.run_id = "run-llm"
    with Store(db) as store:
        store.add_run(RunInfo("run-llm", "2026-01-01T00:00:00", "fixture", {}, "f00d", {}))
        store.add_many([record])
    assert main(["compare", "run-llm", "--reference", "--json", "--db", str(db)]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found and all(m["ratio"] is None for m in found)
    assert all(any(u.startswith("sequence length differs") for u in m["unlike"]) for m in found)
