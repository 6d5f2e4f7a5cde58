"""The hardware's limits beside a serving figure, counted by hand for a known run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accelbench.serve.roofline import Roof, utilization, weight_bytes_per_step
from accelbench.workloads.decoder import Figures

DENSE = Figures(
    params=8_000_000_000,
    active_params=8_000_000_000,
    embedding_params=500_000_000,
    kv_bytes_per_token=131_072,
    flops_per_token=15e9,
    attention_flops_per_context_token=524_288.0,
    element_bytes=2,
)


def test_a_dense_decode_step_reads_every_weight_but_the_embedding_table_and_the_kv_in_flight():
    """64 requests decoding for 10 s, each with 640 tokens of context, on a 4,800 GB/s device: by hand."""
    sut = SimpleNamespace(
        first_issue=0.0, last_answer=10.0, tokens=64 * 129, samples=64, input_tokens=64 * 512,
        flight_integral=64 * 10.0, busy_seconds=10.0, kv_integral=64 * 640 * 10.0, prompt_pairs=64 * 512 * 513 // 2,
    )  # fmt: skip
    metrics, how = utilization(sut, DENSE, Roof(4800.0, "spec", 989.4, "spec"))
    per_step = 7.5e9 * 2 + 64 * 640 * 131_072
    assert how["bytes_per_decode_step"] == pytest.approx(per_step)
    steps = 64 * 128 / 64  # 128 decode steps of 64 tokens each
    assert metrics["decode_bandwidth_utilization"].value == pytest.approx(100 * steps * per_step / 10 / 4.8e12)
    assert metrics["decode_limit_tokens_per_second"].value == pytest.approx(64 * 4.8e12 / per_step)
    prefill = 64 * 512 * 15e9 + 524_288.0 * 64 * 512 * 513 // 2
    assert metrics["prefill_flops_utilization"].value == pytest.approx(100 * prefill / 10 / 989.4e12)


def test_a_tied_table_is_read_whole_and_a_mixture_reads_the_experts_its_tokens_reach():
    tied = Figures(**{**DENSE.__dict__, "tied_embeddings": True})
    assert weight_bytes_per_step(tied, 1) == 8e9 * 2
    moe = Figures(**{**DENSE.__dict__, "experts": 8, "experts_per_token": 2, "expert_params": 6_000_000_000})
    one = weight_bytes_per_step(moe, 1)
    assert one == pytest.approx((7.5e9 - 6e9 * 0.75) * 2)  # one token reaches 2 of 8 experts a layer
    assert weight_bytes_per_step(moe, 64) == pytest.approx(7.5e9 * 2, rel=1e-6)  # 64 tokens reach them all


def test_a_run_that_decoded_nothing_has_no_figure_and_no_peak_flops_means_no_prefill_share():
    idle = SimpleNamespace(first_issue=0.0, last_answer=1.0, tokens=4, samples=4, input_tokens=4, flight_integral=0.0,
                           busy_seconds=0.0, kv_integral=0.0, prompt_pairs=4)  # fmt: skip
    assert utilization(idle, DENSE, Roof(100.0, "spec")) == ({}, {})
    busy = SimpleNamespace(**{**idle.__dict__, "tokens": 40, "flight_integral": 4.0, "busy_seconds": 1.0})
    metrics, how = utilization(busy, DENSE, Roof(100.0, "measured"))
    assert "prefill_flops_utilization" not in metrics and how["bandwidth_source"] == "measured"
