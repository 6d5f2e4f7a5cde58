"""Prompt files and MLPerf's ROUGE gates (issue 28) on real files: a tiny word-level tokenizer saved as a Hugging Face
checkpoint folder (with a chat template), small JSONL and ShareGPT files, and ``rouge-score`` itself.

The tokenizer knows a handful of words, one token each, splits ``:`` off as its own token and puts ``<s>`` before a
prompt read without a template, so every count below is countable by eye.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import BenchmarkSkipped, UsageError
from accelbench.serve import quality
from accelbench.serve.quality import MLPERF_REFERENCE, Scores, gate, score
from accelbench.serve.sources.prompts import read_prompts
from accelbench.serve.sources.tokenizer import load_tokenizer

WORDS = "the cat sat on a mat what is two plus four dog ran user assistant system be brief hello"
TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def save_tokenizer(folder: Path, template: str | None) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # words, and punctuation (":") as its own token
    tok.train_from_iterator([WORDS, ":"], trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
    fast.chat_template = template
    fast.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tokenizer(tmp_path_factory.mktemp("ckpt"), TEMPLATE)


@pytest.fixture(scope="module")
def tokenizer(checkpoint: Path) -> Any:
    return load_tokenizer(checkpoint)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def turns(*pairs: tuple[str, str]) -> dict:
    return {"conversations": [{"from": who, "value": text} for who, text in pairs]}


def words(tokenizer: Any, ids: list[int]) -> list[str]:
    return tokenizer.convert_ids_to_tokens(ids)


# --- prompt files -----------------------------------------------------------------------------------------------


def test_jsonl_keys_template_skips_and_reference_lengths(tmp_path: Path, tokenizer: Any) -> None:
    rows = [
        {"prompt": "what is two plus two", "output": "four"},
        {"input": "the cat sat", "reference": "on the mat"},
        {"question": "what sat on the mat"},  # no reference: the caller's output_tokens
        {"text": "   "},  # empty prompt
        {"id": 7},  # no prompt field
        {"prompt": "the cat sat on the mat the cat sat on the mat", "answer": "a cat"},  # 17 tokens: over 10
        {"prompt": "the dog ran", "output": ""},  # an empty reference is no reference
    ]
    lines = [json.dumps(r) for r in rows]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines[:3] + ["  "] + lines[3:]))  # a blank line is passed over
    got = read_prompts(path, tokenizer, output_tokens=5, max_prompt_tokens=10)
    s = got.samples
    # the chat template (the tokenizer has one): rendered, then tokenized without a second <s>
    assert words(tokenizer, s[0].prompt) == ["<s>", "user", ":", *"what is two plus two".split(), "assistant", ":"]
    assert [len(x.prompt) for x in s] == [10, 8, 10, 8]
    assert [x.reference for x in s] == ["four", "on the mat", None, None]
    assert [x.reference_tokens for x in s] == [1, 3, None, None]
    assert got.output_tokens == [1, 3, 5, 5]  # the reference's length, else output_tokens
    summary = got.summary.to_dict()
    assert summary["format"] == "jsonl" and summary["chat_template"] is True
    assert (summary["read"], summary["samples"], summary["with_reference"]) == (7, 4, 2)
    assert summary["skipped"] == {"empty prompt": 1, "no prompt field": 1, "prompt over 10 tokens": 1}
    assert summary["prompt_tokens"] == {"mean": 9.0, "min": 8, "max": 10}
    assert summary["reference_tokens"] == {"mean": 2.0, "min": 1, "max": 3}
    assert summary["output_tokens"] == {"mean": 3.5, "min": 1, "max": 5}
    assert len(summary["sha256"]) == 64 and summary["max_prompt_tokens"] == 10 and summary["limit"] is None

    # without the template: the raw prompt with the <s> the tokenizer adds; capped output; the first two only
    plain = read_prompts(path, tokenizer, output_tokens=5, max_output_tokens=2, chat_template=False, limit=2)
    assert words(tokenizer, plain.samples[0].prompt) == ["<s>", *"what is two plus two".split()]
    assert plain.output_tokens == [1, 2] and plain.summary.read == 2 and plain.summary.chat_template is False


def test_sharegpt_first_human_turn_and_its_answer(tmp_path: Path, tokenizer: Any) -> None:
    data = [
        turns(("human", "what is two plus two"), ("gpt", "four")),
        turns(("system", "be brief"), ("human", "the cat sat"), ("gpt", "on a mat"), ("human", "hello"), ("gpt", "a")),
        turns(("human", "hello")),  # no answer
        turns(("gpt", "hello"), ("gpt", "hello")),  # nobody asks
        {"id": "x"},  # no conversations at all
        turns(("human", "the cat"), ("human", "sat")),  # the turn after the question is no answer
        turns(("human", "the dog ran"), ("gpt", "")),  # an empty answer is none
    ]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data, indent=1))
    got = read_prompts(path, tokenizer, output_tokens=9, chat_template=False)
    assert [words(tokenizer, x.prompt) for x in got.samples] == [
        ["<s>", "what", "is", "two", "plus", "two"],
        ["<s>", "the", "cat", "sat"],  # the system turn is passed over, the human turn read
    ]
    assert [x.reference for x in got.samples] == ["four", "on a mat"]
    assert got.output_tokens == [1, 3]
    summary = got.summary
    assert summary.format == "sharegpt" and summary.read == 7 and summary.samples == 2
    assert summary.skipped == {
        "no gpt answer after the first human turn": 3,
        "no human turn": 1,
        "no conversations list": 1,
    }
    # the same conversations as JSONL read the same way
    lines = write_jsonl(tmp_path / "sharegpt.jsonl", data)
    again = read_prompts(lines, tokenizer, output_tokens=9, chat_template=False)
    assert again.prompts == got.prompts and again.summary.skipped == summary.skipped


def test_a_json_list_of_prompt_objects(tmp_path: Path, tokenizer: Any) -> None:
    path = tmp_path / "list.json"
    path.write_text(json.dumps([{"prompt": "the cat", "output": "sat"}, {"prompt": "the dog"}]))
    got = read_prompts(path, tokenizer, output_tokens=4, chat_template=False)
    assert got.summary.format == "json"
    assert [words(tokenizer, p) for p in got.prompts] == [["<s>", "the", "cat"], ["<s>", "the", "dog"]]
    assert got.output_tokens == [1, 4]


def test_errors_say_what_to_fix(tmp_path: Path, checkpoint: Path, tokenizer: Any) -> None:
    def error(path: Path, **kw: Any) -> str:
        with pytest.raises(UsageError) as e:
            read_prompts(path, tokenizer, **({"output_tokens": 4} | kw))
        message = str(e.value)
        assert "\n" not in message
        return message

    assert "does not exist" in error(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "the cat"}\n\n{"prompt": the cat}\n')
    assert "is not JSONL: line 3 is not JSON" in error(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"prompt": "the cat"},\n {oops}]')
    assert "is not JSON: line 2" in error(broken)
    keys = write_jsonl(tmp_path / "keys.jsonl", [{"q": "the cat", "a": "sat"}, {"q": "the dog", "id": 2}])
    assert error(keys).endswith("has no prompt field (prompt, input, question, text); its keys: a, id, q")
    long = write_jsonl(tmp_path / "long.jsonl", [{"prompt": "the cat sat"}, {"prompt": "the dog ran"}, {"id": 1}])
    assert error(long, max_prompt_tokens=2, chat_template=False).endswith(
        "has no usable samples (2 prompt over 2 tokens, 1 no prompt field)"
    )
    scalar = write_jsonl(tmp_path / "scalar.jsonl", ["the cat"])
    assert "line 1 is a JSON str, not an object" in error(scalar)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert "is empty" in error(empty)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "is not UTF-8 text" in error(binary)
    assert "at least 1" in error(long, output_tokens=0)
    assert "is not one of auto, jsonl, json, sharegpt" in error(long, fmt="csv")

    # the checkpoint: a folder, with tokenizer files; a template only where the tokenizer has one
    with pytest.raises(UsageError, match="is not a folder"):
        load_tokenizer(tmp_path / "nowhere")
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "config.json").write_text("{}")
    with pytest.raises(UsageError, match=r"weights has no tokenizer files \(tokenizer.json, tokenizer.model"):
        load_tokenizer(tmp_path / "weights")
    plain = load_tokenizer(save_tokenizer(tmp_path / "plain", None))
    with pytest.raises(UsageError, match="has no chat template"):
        read_prompts(long, plain, output_tokens=4, chat_template=True)
    assert read_prompts(long, plain, output_tokens=4).summary.chat_template is False  # by default: where it has one


# --- ROUGE, MLPerf's way ----------------------------------------------------------------------------------------


def test_rouge_known_values() -> None:
    same = score(["The cat sat on the mat."], ["The cat sat on the mat."], [6])
    assert (same.rouge1, same.rouge2, same.rougeL, same.rougeLsum) == (100, 100, 100, 100)
    assert same.tokens_per_sample == 6 and same.samples == 1
    # by hand, tokens "the cat sat on the mat" against "the cat sat on a mat": 5 of 6 unigrams match (F 5/6),
    # 3 of 5 bigrams (the cat, cat sat, sat on: F 3/5), the longest common subsequence is 5 long (F 5/6)
    partial = score(["the cat sat on the mat"], ["the cat sat on a mat"])
    assert partial.rouge1 == pytest.approx(100 * 5 / 6) and partial.rouge2 == pytest.approx(60)
    assert partial.rougeL == pytest.approx(100 * 5 / 6) and partial.rougeLsum == pytest.approx(100 * 5 / 6)
    assert partial.tokens_per_sample is None and partial.chars_per_sample == 22
    # Porter stemming, as MLPerf (use_stemmer=True): "cats running" is "cat run"
    assert score(["Cats running!"], ["cat run"]).rouge1 == 100
    # sentences swapped: ROUGE-L's one subsequence covers one sentence (3 of 6 tokens: F 0.5); ROUGE-Lsum, which
    # reads each sentence on its own line (the splitter puts them there), finds both (F 1)
    swapped = score(["The dog ran. The cat sat."], ["The cat sat. The dog ran."])
    assert swapped.rougeL == pytest.approx(50) and swapped.rougeLsum == pytest.approx(100)
    assert swapped.chars_per_sample == len("The dog ran.\nThe cat sat.")
    # a mean over samples, as MLPerf's use_aggregator=False: (100 + 0) / 2
    assert score(["the cat", "the dog"], ["the cat", "four"]).rouge1 == pytest.approx(50)
    split, _ = quality.sentence_splitter()
    assert split("Dr. Smith sat. The U.S. economy grew 3.5 percent.") == [
        "Dr. Smith sat.",
        "The U.S. economy grew 3.5 percent.",
    ]
    with pytest.raises(UsageError, match="2 generated texts for 1 references"):
        score(["a", "b"], ["a"])


def test_rouge_score_missing_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rouge_score", None)  # what an environment without it imports
    reason = quality.unavailable()
    assert reason is not None and "pip install rouge-score" in reason
    with pytest.raises(BenchmarkSkipped, match="pip install rouge-score"):
        score(["the cat"], ["the cat"])


def test_decode_skips_special_tokens(tokenizer: Any) -> None:
    ids = tokenizer("the cat sat")["input_ids"] + [tokenizer.eos_token_id]
    assert quality.decode(tokenizer, [ids]) == ["the cat sat"]


# --- the gates --------------------------------------------------------------------------------------------------


REF = {"rouge1": 50.0, "rouge2": 20.0, "rougeL": 30.0, "tokens_per_sample": 100.0}


def test_gates_at_99_and_99_9_percent() -> None:
    held = gate(REF, REF)
    assert held.passed == {"99%": True, "99.9%": True} and held.reasons == () and held.window.ok
    # 49.6 is 99.2% of 50: over 99% (49.5), under 99.9% (49.95)
    near = gate(REF | {"rouge1": 49.6}, REF)
    assert near.passed == {"99%": True, "99.9%": False}
    assert near.reasons == ("99.9%: rouge1 49.6000 is under 99.9% of the reference's 50.0000 (49.9500)",)
    assert near.ratios["rouge1"] == pytest.approx(0.992)
    far = gate(REF | {"rouge1": 49.0, "rouge2": 25.0}, REF)
    assert far.passed == {"99%": False, "99.9%": False} and len(far.reasons) == 2
    assert all("rouge1" in r for r in far.reasons)
    d = far.to_dict()
    assert d["source"] == "given reference" and d["passed"] == {"99%": False, "99.9%": False}


@pytest.mark.parametrize(("tokens", "ok"), [(89.5, False), (90.5, True), (109.5, True), (110.5, False)])
def test_output_length_window(tokens: float, ok: bool) -> None:
    verdict = gate(REF | {"tokens_per_sample": tokens}, REF)
    assert verdict.window is not None and verdict.window.ok is ok
    assert verdict.passed == {"99%": ok, "99.9%": ok}  # a length outside the window fails both levels
    assert ok or verdict.reasons[0].startswith(f"window: tokens_per_sample {tokens:g} is ")


def test_gate_against_mlperf_and_a_reference_run() -> None:
    llama2 = MLPERF_REFERENCE["llama2-70b"]
    run = {"rouge1": 44.5, "rouge2": 22.1, "rougeL": 28.7, "rougeLsum": 41.0, "tokens_per_sample": 300.0}
    verdict = gate(run, llama2)
    assert set(verdict.ratios) == {"rouge1", "rouge2", "rougeL"}  # llama2-70b is not gated on ROUGE-Lsum
    assert verdict.passed == {"99%": True, "99.9%": True} and verdict.source.startswith("MLPerf Inference")
    # llama3.1-8b's window is on characters per sample (MLPerf's gen_len / gen_num), 611 there
    llama3 = MLPERF_REFERENCE["llama3_1-8b"]
    short = gate({"rouge1": 39.0, "rouge2": 16.0, "rougeL": 24.6, "rougeLsum": 36.0, "chars_per_sample": 500}, llama3)
    assert short.window is not None and short.window.metric == "chars_per_sample" and not short.window.ok
    # the reference a run of the same prompts gave (the fp32 run), and a run without token counts
    fp32 = Scores(40.0, 18.0, 30.0, 35.0, 8, 100.0, 400.0, "test")
    bf16 = Scores(39.97, 17.99, 29.98, 34.97, 8, 104.0, 410.0, "test")  # each over 99.9% of fp32's
    assert gate(bf16, fp32).passed == {"99%": True, "99.9%": True} and gate(bf16, fp32).source == "reference run"
    untimed = Scores(40.0, 18.0, 30.0, 35.0, 8, None, 400.0, "test")
    missing = gate(untimed, fp32)
    assert missing.passed == {"99%": False, "99.9%": False} and missing.reasons[0].startswith("window: the run has no")
    assert gate(bf16.to_dict(), fp32.to_dict()).passed["99.9%"]  # a record's stored scores gate the same
    with pytest.raises(UsageError, match="no ROUGE score"):
        gate(REF, {"tokens_per_sample": 3})
