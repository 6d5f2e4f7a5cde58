"""Accuracy mode for language models (issue 28): the served greedy tokens against FP32's on the same weights, judged
at the positions rounding cannot flip.

Two real runs in one ``accelbench run`` (one interpreter, each benchmark in its own worker): the tiny llama3.1-8b
served in bf16 by the static engine, which must keep every decided token; and the same served by an engine whose
model was rounded 4 bits coarser than bf16 (a broken path, as a wrongly scaled quantizer is), which must fail with
the reason. The walk and the uninformative cases are checked on hand-made references.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from accelbench.serve.accuracy import Reference, judge

#: a broken engine: the static engine serving a copy rounded 4 bits coarser than bf16 (4 significant bits)
BROKEN = """
from accelbench.measure.rounding import rounded_copy
from accelbench.serve.engines.static import StaticBatch


class Coarse(StaticBatch):
    name = "coarse"

    def start(self, model, device, sink, settings):
        super().start(rounded_copy(model.float(), "bf16", coarser=4), device, sink, settings)
"""

COMMON = (
    'model = "llama3.1-8b", scale = "tiny", mode = "accuracy", precision = "bf16", scenario = "offline", '
    "input_tokens = 16, output_tokens = 8, batch_size = 8"
)


#: a prompt file's samples: a question and the answer it should get, in the test tokenizer's words
QA = [
    ("what is two plus four", "two plus four be the cat"),
    ("the cat sat on a mat", "the dog ran"),
    ("hello be brief", "hello"),
    ("what sat on the mat", "a cat sat on the mat"),
] * 3


def tiny_checkpoint(folder: Path) -> Path:
    """A save_pretrained folder: a tiny random llama over the test tokenizer's words, and that tokenizer."""
    import torch
    from test_llm_prompts import TEMPLATE, save_tokenizer
    from transformers import AutoModelForCausalLM, LlamaConfig

    from accelbench.serve.sources.tokenizer import load_tokenizer

    save_tokenizer(folder, TEMPLATE)
    vocab = len(load_tokenizer(folder))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )  # fmt: skip
    AutoModelForCausalLM.from_config(config).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("llm-accuracy")
    (root / "broken_engine.py").write_text(BROKEN)
    checkpoint = tiny_checkpoint(root / "ckpt")
    qa = root / "qa.jsonl"
    qa.write_text("".join(json.dumps({"prompt": q, "output": a}) + "\n" for q, a in QA))
    real = f'model = "llama3.1-8b", checkpoint = "{checkpoint}", prompts = "{qa}", scenario = "offline", batch_size = 4'
    suite = root / "accuracy.toml"
    suite.write_text(
        f'[[benchmark]]\nname = "infer/loadgen"\nparams = {{ {COMMON}, engine = "static" }}\n'
        f'[[benchmark]]\nname = "infer/loadgen"\nparams = {{ {COMMON}, engine = "broken_engine:Coarse" }}\n'
        f'[[benchmark]]\nname = "infer/loadgen"\nparams = {{ {real}, mode = "accuracy", engine = "static" }}\n'
        f'[[benchmark]]\nname = "infer/loadgen"\nparams = {{ {real}, engine = "transformers", allow_eos = true }}\n'
    )
    env = dict(os.environ) | {
        "ACCELBENCH_HOME": str(root / "home"),
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    p = run_cli(["run", str(suite), "--threads", "1", "--json", "--db", str(root / "a.db")], env, root, process=True)
    results = json.loads(p.stdout)["results"]
    assert len(results) == 4, p.stderr[-2000:]
    return {r["params"]["engine"] + ("+prompts" if r["params"].get("prompts") else ""): r for r in results}


def test_a_prompt_file_with_answers_is_scored_with_rouge_against_fp32_s(judged):
    r = judged["static+prompts"]
    assert r["status"] == "ok", r.get("error")
    rouge = r["details"]["rouge"]
    assert rouge["served"]["samples"] == len(QA)
    assert r["primary_metric"] == "rougeL" and r["details"]["accuracy_verified"] is True
    # what was verified: the engine keeps FP32's answers on these (random) weights, not that they are good ones
    assert r["details"]["verified"] == "engine fidelity against FP32 on the same weights"
    assert "not the answers' quality (ROUGE-2 " in r["details"]["gate"]
    # FP32 served by the static engine: its answers are FP32's, so each score is the reference's
    assert r["metrics"]["rougeL"]["value"] == pytest.approx(r["metrics"]["reference_rougeL"]["value"])
    assert r["valid"] is True and r["details"]["accuracy_gates"] == {"99%": True, "99.9%": True}
    assert r["details"]["prompts"]["samples"] == len(QA) and r["details"]["prompts"]["chat_template"] is True


def test_a_prompt_file_s_answers_set_the_output_lengths_and_eos_may_end_them(judged):
    r = judged["transformers+prompts"]
    assert r["status"] == "ok" and r["valid"] is True, r["warnings"]
    summary = r["details"]["prompts"]
    assert summary["output_tokens"]["max"] == max(len(a.split()) for _, a in QA)  # one word, one token
    # --allow-eos: a request may stop at its end of sequence, never later than its reference's length
    assert r["details"]["output_tokens"] <= r["details"]["requests"] * summary["output_tokens"]["max"]


def test_bf16_keeps_every_decided_token_of_fp32(judged):
    r = judged["static"]
    assert r["status"] == "ok" and r["valid"] is True, r["warnings"]
    fid = r["details"]["token_fidelity"]
    assert r["metrics"]["decided_token_agreement"]["value"] == 1.0
    assert fid["decided_in_reference"] >= 20 and fid["decided_flipped_by_coarser"] > 0  # the test can see a fault
    assert r["details"]["accuracy_verified"] is False and "accuracy not verified" in r["details"]["gate"]
    assert r["details"]["accuracy_gates"] == {"99%": True, "99.9%": True}
    assert r["primary_metric"] == "decided_token_agreement"


def test_a_path_rounded_four_bits_coarser_fails_with_the_reason(judged):
    r = judged["broken_engine:Coarse"]
    assert r["status"] == "ok" and r["valid"] is False
    assert r["metrics"]["decided_token_agreement"]["value"] < 0.99
    assert any("leave FP32's where rounding cannot" in w for w in r["warnings"]), r["warnings"]


def _ref(tokens: list[list[int]], decided: list[list[bool]], flips: bool = True) -> Reference:
    leads = [np.where(np.array(d), 1.0, 0.0) for d in decided]
    rounding = [np.full(len(d), 0.01) for d in decided]
    coarse = [np.array(d) & flips for d in decided]
    return Reference(tokens, leads, rounding, coarse, "bf16")


def test_the_walk_forgives_an_undecided_divergence_and_counts_a_decided_one():
    want = [list(range(i, i + 30)) for i in range(0, 90, 30)]
    decided = [[True] * 30 for _ in want]
    decided[0][10] = False  # prompt 0 may leave FP32 at 10
    got = [w.copy() for w in want]
    got[0][10:] = [999] * 20  # leaves at an undecided position: no fault, the rest is not compared
    v = judge(got, _ref(want, decided), "bf16")
    assert v.reached == 10 + 30 + 30 and v.kept == v.reached and v.passed
    assert v.sequences_equal == pytest.approx(2 / 3)
    got[1][5] = 999  # leaves at a decided position: a fault, and the walk stops there
    v = judge(got, _ref(want, decided), "bf16")
    assert (v.reached, v.kept) == (10 + 6 + 30, 10 + 5 + 30) and not v.passed


def test_degenerate_or_unresponsive_references_give_no_verdict():
    want = [[7] * 30 for _ in range(3)]
    v = judge(want, _ref(want, [[True] * 30] * 3), "bf16")
    assert v.informative and "distinct token" in v.informative
    varied = [list(range(30)) for _ in range(3)]
    assert "flips none" in judge(varied, _ref(varied, [[True] * 30] * 3, flips=False), "bf16").informative
    few = judge(varied, _ref(varied, [[True] * 5 + [False] * 25] * 3), "bf16")
    assert "only 15 positions are decided" in few.informative
    broken = judge([[999] * 30] * 3, _ref(varied, [[True] * 30] * 3), "bf16")
    assert broken.informative is None and broken.reached == 3 and not broken.passed  # garbage fails, not "too few"


def test_accuracy_is_refused_where_it_cannot_judge(cli_env, tmp_path: Path):
    for args, message in (
        (["--engine", "null"], "needs an engine that runs the model"),
        (["--dataset", str(tmp_path)], "--dataset applies to models served a batch at a time"),
    ):
        p = run_cli(["infer", "llama3.1-8b", "--scale", "tiny", "--mode", "accuracy", *args], cli_env, tmp_path)
        assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_bad_prompt_file_is_one_line_before_any_model_is_built(cli_env, tmp_path: Path):
    checkpoint = tiny_checkpoint(tmp_path / "ckpt")
    (tmp_path / "broken.jsonl").write_text('{"prompt": "the cat"}\nnot json\n')
    (tmp_path / "keys.jsonl").write_text('{"q": "the cat"}\n')
    for name, message in (
        ("broken.jsonl", "line 2 is not JSON"),
        ("keys.jsonl", "has no prompt field (prompt, input, question, text); its keys: q"),
        ("missing.jsonl", "does not exist"),
    ):
        args = ["infer", "llama3.1-8b", "--checkpoint", str(checkpoint), "--prompts", str(tmp_path / name)]
        p = run_cli([*args, "--db", str(tmp_path / "r.db")], cli_env, tmp_path)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and message in p.stderr, p.stderr
        assert "building" not in p.stdout + p.stderr  # refused before a run began
