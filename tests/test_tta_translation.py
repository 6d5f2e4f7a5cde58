"""Time to BLEU: GNMT and the Transformer on WMT-style parallel text, scored by sacreBLEU, to a target over 3 seeds.

The corpus is a toy English-German written in WMT's layout (tta_fixtures.write_parallel): a tiny model learns it
in seconds, and BLEU is then sacreBLEU's on the detokenized translations, which these tests check against
sacreBLEU called directly (a wrong or shuffled translation lowers it).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from tta_fixtures import translate_toy, write_parallel

from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, make_entry

TTA = "tta/time_to_target"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_parallel(tmp_path_factory.mktemp("wmt"))


@pytest.fixture
def run_tta(tmp_path, store, profile):
    def run(params: dict) -> list:
        suite = Suite("t", [make_entry(TTA, {"threads": 2, **params})])
        return run_suite(suite, store, RunOptions(out_dir=tmp_path), None, profile=profile).results

    return run


@pytest.mark.parametrize("workload", ["transformer", "gnmt"])
def test_a_tiny_translator_reaches_its_bleu_target_over_three_seeds(workload, corpus, run_tta):
    [r] = run_tta(
        {"workload": workload, "scale": "tiny", "data_dir": str(corpus), "target": 40.0, "seeds": 3, "seed": 1}
        | {"max_epochs": 30}  # the recipes' caps are WMT's epochs; the toy corpus takes 10-15 of its small ones
    )
    assert r.status == "ok", r.error or r.reason
    assert r.valid, r.details
    seeds = r.details["seeds"]
    assert len(seeds) == 3 and all(s["converged"] for s in seeds)
    assert all(s["final_quality"] >= 40.0 and s["curve"][-1]["quality"] <= 100.0 for s in seeds)
    assert r.metrics["time_to_target_seconds"].value > 0

    from mlperf_logging.compliance_checker import mlp_parser

    for path in r.details["mlperf_logs"]:
        lines, errors = mlp_parser.parse_file(path, ruleset="4.0.0")
        assert not errors
        keys = [ll.key for ll in lines]
        assert lines[keys.index("submission_benchmark")].value["value"] == workload
        assert "eval_accuracy" in keys and lines[keys.index("run_stop")].value["metadata"]["status"] == "success"
        beam = lines[keys.index("eval_beam_size")].value["value"]
        assert beam == (4 if workload == "transformer" else 5)


def test_bleu_is_sacrebleus_over_the_whole_set_however_the_ranks_share_it(corpus):
    """Each rank's n-gram counts, summed, give sacreBLEU's corpus BLEU of the whole set; shuffled or wrong
    translations score lower."""
    import sacrebleu

    from accelbench.tta.recipes import recipe

    r = recipe("transformer")
    refs = (corpus / "newstest2014.de").read_text().splitlines()
    sources = (corpus / "newstest2014.en").read_text().splitlines()
    right = [" ".join(translate_toy(s.split())) for s in sources]
    assert right == refs
    half = [p for p in refs[::2] if p]  # a translation system that gets half the words
    hyps = [" ".join(h.split()[: max(1, len(h.split()) // 2)]) for h in refs]

    def parts(hs: list[str], world: int) -> list:
        from sacrebleu.metrics import BLEU

        out = []
        for rank in range(world):
            s = BLEU().corpus_score(hs[rank::world], [refs[rank::world]])
            out.append((list(s.counts), list(s.totals), s.sys_len, s.ref_len))
        return out

    whole = sacrebleu.corpus_bleu(hyps, [refs]).score
    assert r.combine(parts(hyps, 1)) == pytest.approx(whole)
    assert r.combine(parts(hyps, 3)) == pytest.approx(whole)
    assert r.combine(parts(right, 2)) == pytest.approx(100.0)
    shuffled = right[1:] + right[:1]
    assert r.combine(parts(shuffled, 2)) < 30.0 and half


@pytest.mark.parametrize(
    ("files", "target", "message"),
    [
        ({"train.en": "a b\n", "train.de": "x y\n"}, 0.0, "no evaluation split: expected newstest2014.en"),
        (
            {"train.en": "a\nb\n", "train.de": "x\n", "newstest2014.en": "a\n", "newstest2014.de": "x\n"},
            0.0,
            "train.en has 2 lines and train.de 1",
        ),
        ({"train.en": "a\n", "train.de": "x\n", "test.en": "a\n", "test.de": "x\n"}, 120.0, "outside bleu's range"),
    ],
)
def test_bad_parallel_text_is_one_line_and_exit_2(tmp_path, files, target, message, cli_env):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = ["tta", "gnmt", "--scale", "tiny", "--data-dir", str(tmp_path), "--seeds", "1"]
    if target:
        args += ["--target", str(target)]
    out = subprocess.run(
        [sys.executable, "-m", "accelbench", *args], capture_output=True, text=True, env=cli_env, cwd=tmp_path
    )
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.slow  # torchrun: two ranks translate half the set each
def test_two_ranks_shard_the_translation_and_sum_the_counts(corpus, run_tta):
    [r] = run_tta(
        {"workload": "transformer", "scale": "tiny", "data_dir": str(corpus), "target": 40.0, "seeds": 1, "seed": 2}
        | {"nproc": 2, "threads": 1, "max_epochs": 40}
    )
    assert r.status == "ok", r.error or r.reason
    assert r.details["seeds"][0]["converged"]


def test_list_tta_shows_every_workload_with_its_data_metric_and_target(capsys, monkeypatch):
    from accelbench.cli.main import main

    monkeypatch.setenv("COLUMNS", "240")
    assert main(["list", "--tta"]) == 0
    out = capsys.readouterr().out
    for name, metric, target in (
        ("gnmt", "bleu", ">= 21.8"),
        ("transformer", "bleu", ">= 25"),
        ("imagenet", "top1", ""),
        ("maskrcnn", "box_map and mask_map", ">= 0.377, >= 0.339"),
    ):
        row = next(line for line in out.splitlines() if f" {name} " in line)
        assert metric in row and target in row
    assert "newstest2014.en" in out


@pytest.mark.parametrize("name", ["transformer", "gnmt"])
def test_incremental_decoding_is_the_whole_prefix_decode(name):
    """Beam search encodes once and decodes one position per step (the Transformer's keys and values cached, GNMT's
    LSTM states carried): each step's logits are those the whole-prefix forward gives at that position, padding
    masked alike, and beam search finds the same translations either way."""
    import torch

    from accelbench.tta.recipes.beam import beam_search
    from accelbench.workloads import workload_class

    torch.manual_seed(0)
    model = workload_class(name)().build("tiny").eval()
    src = torch.randint(4, 1000, (3, 9))
    src[1, 6:] = 0
    src[2, 4:] = 0
    pad = src == 0
    tgt = torch.randint(4, 1000, (3, 7))
    with torch.no_grad():
        whole = model(src, tgt, pad)
        memory, state = model.encode(src, pad), None
        for t in range(tgt.shape[1]):
            logits, state = model.step(memory, pad, tgt[:, t], t, state)
            assert torch.allclose(logits, whole[:, t], atol=1e-4), (t, (logits - whole[:, t]).abs().max())

        class Whole(torch.nn.Module):  # the same weights, without the incremental methods
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, *args):
                return self.inner(*args)

        cached = beam_search(model, src, pad, 1, 2, 12, 4, 0.6)
        assert cached == beam_search(Whole(model), src, pad, 1, 2, 12, 4, 0.6)
        assert any(len(row) > 3 for row in cached)
