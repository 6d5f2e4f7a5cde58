"""Time to quality for a language model: llama3.1-8b-text trains its tiny scale on a local corpus to a validation loss.

The corpora are sentences of a small grammar, written here (learnable, so a tiny model's loss falls within a
few epochs); the BPE tokenizer is trained here with the ``tokenizers`` library. Everything runs through the CLI,
as a user runs it: the record comes from the store, the MLPerf logs from the run folder.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from conftest import run_cli, stored

from accelbench.errors import UsageError

NOUNS = ("cat", "dog", "bird", "fish", "child", "farmer", "teacher", "robot")
ADJECTIVES = ("small", "red", "happy", "old", "quick", "quiet")
VERBS = ("sees", "likes", "follows", "helps", "finds", "calls")
PLACES = ("in the garden", "near the river", "at the school", "on the hill")


def prose(sentences: int, seed: int) -> str:
    """``sentences`` sentences of the grammar, four to a line."""
    rng = random.Random(seed)
    out = []
    for _ in range(sentences):
        s = f"the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {rng.choice(VERBS)} the {rng.choice(NOUNS)}"
        out.append(s + (f" {rng.choice(PLACES)}." if rng.random() < 0.5 else "."))
    return "\n".join(" ".join(out[i : i + 4]) for i in range(0, len(out), 4)) + "\n"


def write_bpe(path: Path, training_file: Path, vocab: int = 300) -> Path:
    """A byte-level BPE tokenizer.json trained on ``training_file``, with an <|endoftext|> special token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train([str(training_file)], trainer)
    tok.save(str(path))
    return path


def tta(data: Path, env: dict[str, str], cwd: Path, *flags: str):  # type: ignore[no-untyped-def]
    """``accelbench tta llama3.1-8b-text --scale tiny --data-dir DATA FLAGS``: the process result and its record."""
    out = run_cli(["tta", "llama3.1-8b-text", "--scale", "tiny", "--data-dir", str(data), *flags], env, cwd)
    records = stored(Path(env["ACCELBENCH_HOME"]) / "accelbench.db")
    return out, records[-1] if records else None


def check_logs(record) -> None:  # type: ignore[no-untyped-def]
    """Each seed's MLPerf log parses under MLPerf's 4.0.0 rules, says what the corpus became and ends in success."""
    from mlperf_logging.compliance_checker import mlp_parser

    logs = record.details["mlperf_logs"]
    assert len(logs) == len(record.details["seeds"])
    for path in logs:
        lines, errors = mlp_parser.parse_file(path, ruleset="4.0.0")
        assert not errors
        keys = [line.key for line in lines]
        for key in ("submission_benchmark", "run_start", "eval_accuracy", "run_stop", "tokenizer", "vocab_size"):
            assert key in keys, key
        assert lines[keys.index("submission_benchmark")].value["value"] == "llama31_8b"
        assert lines[keys.index("run_stop")].value["metadata"]["status"] == "success"


def test_byte_level_corpus_reaches_the_default_loss_target(tmp_path, cli_env):
    """No tokenizer.json and no val*.txt: UTF-8 bytes, the last tenth held out, the recipe's own target (2.0)."""
    data = tmp_path / "corpus"
    data.mkdir()
    (data / "a.txt").write_text(prose(250, seed=0))
    (data / "more").mkdir()
    (data / "more" / "b.txt").write_text(prose(250, seed=1))
    out, r = tta(data, cli_env, tmp_path, "--seeds", "2", "--seed", "5", "--batch-size", "8")
    assert out.returncode == 0, out.stdout + out.stderr
    assert r.status == "ok" and r.valid, r.error or r.warnings
    assert r.details["metric"] == "val_loss" and r.details["target"] == 2.0
    assert "UTF-8 bytes" in r.details["recipe"]
    seeds = r.details["seeds"]
    assert [s["seed"] for s in seeds] == [5, 6] and all(s["converged"] for s in seeds)
    for s in seeds:  # lower is better: the run stops at the first evaluation at or below the target
        qualities = [c["quality"] for c in s["curve"]]
        assert qualities[-1] <= 2.0 < min(qualities[:-1], default=99.0)
    times = [s["time_to_target"] for s in seeds]
    assert r.metrics["time_to_target_seconds"].value == pytest.approx(sum(times) / 2)
    check_logs(r)
    log = Path(r.details["mlperf_logs"][0]).read_text()
    assert '"key": "vocab_size", "value": 257' in log and '"key": "max_sequence_length", "value": 128' in log


def test_tokenizer_json_and_a_validation_file(tmp_path, cli_env):
    """The folder's tokenizer.json sets the vocabulary; valid.txt is the validation split; test.txt is unused."""
    from accelbench.tta.recipes.text import Tokenizer, corpus

    data = tmp_path / "corpus"
    data.mkdir()
    (data / "train.txt").write_text(prose(1000, seed=0))
    (data / "valid.txt").write_text(prose(100, seed=1))
    (data / "test.txt").write_text(prose(400, seed=2))
    write_bpe(data / "tokenizer.json", data / "train.txt")
    train, val = corpus(data, 128)
    assert train.vocab == val.vocab == 300 and train.tokenizer == "tokenizer.json (300 tokens)"
    assert int(train.ids.max()) < 300 and len(val) < len(train) // 5  # valid.txt alone (test.txt left out)
    eot = json.loads((data / "tokenizer.json").read_text())["added_tokens"][0]["id"]
    assert Tokenizer(data).encode("the cat.")[-1] == eot  # each document ends in the end-of-text token

    out, r = tta(data, cli_env, tmp_path, "--seeds", "1", "--seed", "1", "--batch-size", "8", "--target", "1.3")
    assert out.returncode == 0, out.stdout + out.stderr
    assert r.status == "ok" and r.valid and r.details["target"] == 1.3, r.error or r.warnings
    [seed] = r.details["seeds"]
    assert seed["converged"] and seed["final_quality"] <= 1.3
    assert r.metrics["epochs_to_target"].value >= 1 and r.metrics["throughput"].value > 0
    check_logs(r)
    assert '"key": "vocab_size", "value": 300' in Path(seed["log"]).read_text()


@pytest.mark.parametrize(
    "files, message",
    [
        ({"notes.md": "no text files here"}, "holds no .txt files"),
        ({"a.txt": "too short"}, "too small: 0 training and 0 validation sequences"),
        ({"a.txt": "x" * 300, "val.txt": "short"}, "too small: 2 training and 0 validation sequences"),
    ],
)
def test_bad_corpus_is_one_line_and_exit_2(tmp_path, cli_env, files, message):
    data = tmp_path / "corpus"
    data.mkdir()
    for name, text in files.items():
        (data / name).write_text(text)
    out, r = tta(data, cli_env, tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr and r is None
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_bad_tokenizer_or_encoding_is_a_usage_error(tmp_path):
    from accelbench.tta.recipes.text import corpus

    (tmp_path / "a.txt").write_bytes(b"\xff\xfe not utf-8" * 100)
    with pytest.raises(UsageError, match="not UTF-8"):
        corpus(tmp_path, 128)
    (tmp_path / "a.txt").write_text("fine " * 200)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(UsageError, match="tokenizer.json"):
        corpus(tmp_path, 128)


def test_lower_is_better_targets():
    """A loss is reached at or below its target; an accuracy at or above (the other recipes are unchanged)."""
    from accelbench.tta.loop import reached
    from accelbench.tta.recipes import recipe

    text, digits = recipe("llama3.1-8b-text"), recipe("digits")
    assert reached(text, 1.9, 2.0) and reached(text, 2.0, 2.0) and not reached(text, 2.1, 2.0)
    assert reached(digits, 0.99, 0.98) and not reached(digits, 0.97, 0.98)
