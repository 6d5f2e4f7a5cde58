"""MLPerf's processed language data sets read from a folder: tiny files in the documented layouts (a JSON list for
llama3.1-8b, pickled DataFrames for llama2-70b and mixtral-8x7b) over the word-level test tokenizer of
``test_llm_prompts``, whose ids are few enough to write by hand."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_llm_prompts import save_tokenizer

from accelbench.errors import UsageError
from accelbench.serve.sources import mlperf_data
from accelbench.serve.sources.mlperf_data import MLPERF_SETS, needs, read_mlperf
from accelbench.serve.sources.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_tokenizer(save_tokenizer(tmp_path_factory.mktemp("ckpt"), None))


def ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text)["input_ids"])


def cnn_rows(tokenizer: Any) -> list[dict[str, Any]]:
    """download_cnndm.py's records: the bare article, the instruction, the ids of the instructed prompt, the
    highlights."""
    articles = [("the cat sat on a mat", "the cat sat"), ("a dog ran", "dog ran"), ("two plus four", "be brief")]
    return [
        {
            "instruction": {"llama": "Summarize {input}"},
            "input": article,
            "tok_input": ids(tokenizer, f"what is {article}"),
            "output": answer,
        }
        for article, answer in articles
    ]


def write_json(folder: Path, rows: Any, name: str = "cnn_eval.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(rows, indent=4))
    return path


def test_llama3_1_8b_serves_the_files_ids_with_mlperfs_output_length(tmp_path: Path, tokenizer: Any) -> None:
    rows = cnn_rows(tokenizer)
    path = write_json(tmp_path, rows)
    got = read_mlperf(tmp_path, "llama3_1-8b", tokenizer)
    assert got.prompts == [r["tok_input"] for r in rows]  # exactly the file's ids, nothing re-tokenized
    assert got.output_tokens == [128, 128, 128]  # language/llama3.1-8b/SUT_VLLM.py: max_tokens 128
    assert [s.reference for s in got.samples] == ["the cat sat", "dog ran", "be brief"]
    assert [s.reference_tokens for s in got.samples] == [3, 2, 2]  # counted without special tokens
    summary = got.summary.to_dict()
    assert summary["format"] == "mlperf llama3_1-8b cnn_eval.json"
    assert summary["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert summary["chat_template"] is False
    assert (summary["read"], summary["samples"], summary["with_reference"]) == (3, 3, 3)
    assert summary["mlperf_benchmark"] == "llama3_1-8b"
    assert summary["mlperf_samples"] == 13368
    assert summary["served_whole"] is False  # 3 of 13,368
    assert summary["max_output_tokens_mlperf"] == 128
    assert "SUT_VLLM.py" in summary["max_output_tokens_mlperf_source"]
    assert "EOS" in summary["output_tokens_rule"]
    assert summary["prompt_ids"] == "tok_input"


def test_the_cap_and_the_limit(tmp_path: Path, tokenizer: Any) -> None:
    write_json(tmp_path, cnn_rows(tokenizer))
    assert read_mlperf(tmp_path, "llama3_1-8b", tokenizer, max_output_tokens=16).output_tokens == [16, 16, 16]
    assert read_mlperf(tmp_path, "llama3_1-8b", tokenizer, max_output_tokens=500).output_tokens == [128] * 3
    limited = read_mlperf(tmp_path, "llama3_1-8b", tokenizer, limit=2)
    assert len(limited.samples) == 2 and limited.summary.read == 2
    assert limited.summary.settings["limit"] == 2 and limited.summary.settings["served_whole"] is False


def test_served_whole_when_every_sample_of_the_set_is_read(
    tmp_path: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_json(tmp_path, cnn_rows(tokenizer))
    monkeypatch.setitem(MLPERF_SETS, "llama3_1-8b", dataclasses.replace(MLPERF_SETS["llama3_1-8b"], samples=3))
    assert read_mlperf(tmp_path, "llama3_1-8b", tokenizer).summary.settings["served_whole"] is True
    assert read_mlperf(tmp_path, "llama3_1-8b", tokenizer, limit=2).summary.settings["served_whole"] is False


def test_llama2_70b_pickle_gzipped_one_folder_down(tmp_path: Path, tokenizer: Any) -> None:
    pd = pytest.importorskip("pandas", reason="MLPerf's llama2-70b data set is a pandas pickle")
    np = pytest.importorskip("numpy")
    frame = pd.DataFrame(
        {
            "id": ["cot.1", "flan.2"],
            "input": ["<s>[INST] what is two [/INST]", "<s>[INST] hello [/INST]"],
            "tok_input": [[1, 1, 7, 8], np.array([1, 9, 10], dtype=np.int64)],  # a list, or an ndarray
            "output": ["two plus four", "hello"],
            "tok_output": [[11, 12, 13], [20]],
            "origin": ["cot", "flan"],
        }
    )
    (tmp_path / "open_orca").mkdir()
    frame.to_pickle(tmp_path / "open_orca" / "open_orca_gpt4_tokenized_llama.sampled_24576.pkl.gz")
    got = read_mlperf(tmp_path, "llama2-70b", tokenizer)
    assert got.prompts == [[1, 1, 7, 8], [1, 9, 10]]
    assert got.output_tokens == [1024, 1024]  # language/llama2-70b/SUT.py: max_new_tokens 1024
    assert [(s.reference, s.reference_tokens) for s in got.samples] == [("two plus four", 3), ("hello", 1)]
    settings = got.summary.settings
    assert (settings["mlperf_samples"], settings["served_whole"]) == (24576, False)
    assert got.summary.format == "mlperf llama2-70b open_orca_gpt4_tokenized_llama.sampled_24576.pkl.gz"


def test_a_pickle_without_ids_is_tokenized_from_its_prompt_text(tmp_path: Path, tokenizer: Any) -> None:
    pd = pytest.importorskip("pandas", reason="MLPerf's llama2-70b data set is a pandas pickle")
    frame = pd.DataFrame({"input": ["the cat", "   "], "output": ["a mat", "dog"]})
    frame.to_pickle(tmp_path / "processed-data.pkl")
    got = read_mlperf(tmp_path, "llama2-70b", tokenizer)
    assert got.prompts == [ids(tokenizer, "the cat")]  # with the BOS, as a prompt file reads without a template
    assert got.summary.skipped == {"no prompt text": 1}
    assert got.summary.settings["prompt_ids"].startswith("input (text, tokenized here")


def test_mixtral_keeps_the_references_rouge_scores(tmp_path: Path, tokenizer: Any) -> None:
    pd = pytest.importorskip("pandas", reason="MLPerf's mixtral-8x7b data set is a pandas pickle")
    frame = pd.DataFrame(
        {
            "dataset": ["OpenOrca", "GSM8K", "MBXP"],
            "id": ["orca.1", "gsm.1", "python_add"],
            "input": ["a", "b", "c"],
            "tok_input": [[1, 3], [1, 4], [1, 5]],
            "gt_output": ["the cat sat", "#### 6", "assert add(1, 2) == 3"],
        }
    )
    frame.to_pickle(tmp_path / "2024.06.06_mixtral_15k_v4.pkl")
    got = read_mlperf(tmp_path, "mixtral-8x7b", tokenizer, max_output_tokens=64)
    assert [s.reference for s in got.samples] == ["the cat sat", None, None]  # GSM8K and MBXP are not ROUGE's
    assert got.output_tokens == [64, 64, 64]
    settings = got.summary.settings
    assert settings["mlperf_subsets"] == {"GSM8K": 1, "MBXP": 1, "OpenOrca": 1}
    assert (settings["mlperf_samples"], settings["min_output_tokens_mlperf"]) == (15000, 2)


def test_needs_names_the_accepted_files() -> None:
    assert needs("llama3_1-8b") == ["cnn_eval.json"]
    assert needs("llama2-70b")[0] == "open_orca_gpt4_tokenized_llama.sampled_24576.pkl"
    assert needs("mixtral-8x7b")[0] == "09292024_mixtral_15k_mintoken2_v1.pkl"
    with pytest.raises(UsageError, match="gpt-oss-120b.*llama3_1-8b, llama2-70b, mixtral-8x7b"):
        needs("gpt-oss-120b")


def test_bad_input_is_one_line(tmp_path: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def error(folder: Path, benchmark: str = "llama3_1-8b", **kw: Any) -> str:
        with pytest.raises(UsageError) as e:
            read_mlperf(folder, benchmark, tokenizer, **kw)
        assert "\n" not in str(e.value)
        return str(e.value)

    assert "does not exist" in error(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "other.pkl").write_bytes(b"never unpickled")
    message = error(empty, "llama2-70b")
    assert "llama2-70b" in message and "open_orca_gpt4_tokenized_llama.sampled_24576.pkl" in message
    assert "cnn_eval.json" in error(empty)
    assert "no MLPerf benchmark" in error(empty, "")  # a preset without one (its mlperf name is empty)
    assert "mixtral-8x7b" in error(empty, "deepseek-r1")
    assert "at least 1" in error(empty, limit=0)

    wrong = tmp_path / "wrong"
    write_json(wrong, [{"article": "the cat", "highlights": "a mat"}])
    message = error(wrong)
    assert "lacks tok_input, output" in message and "its keys: article, highlights" in message
    write_json(tmp_path / "nothing", [])
    assert "no samples" in error(tmp_path / "nothing")
    write_json(tmp_path / "blank", [{"tok_input": [], "output": "x"}])
    assert "no usable samples (1 no prompt ids)" in error(tmp_path / "blank")
    write_json(tmp_path / "vocab", [{"tok_input": [1, 128000], "output": "x"}])
    assert "token id 128000" in error(tmp_path / "vocab")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "cnn_eval.json").write_text("{not json")
    assert "is not JSON" in error(tmp_path / "broken")

    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "processed-data.pkl").write_bytes(b"not a pickle")
    if importlib.util.find_spec("pandas"):
        assert "does not read as a pandas pickle" in error(pickled, "llama2-70b")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    assert "pip install pandas" in error(pickled, "llama2-70b")


def test_a_file_named_in_place_of_its_folder(tmp_path: Path, tokenizer: Any) -> None:
    path = write_json(tmp_path, cnn_rows(tokenizer))
    assert len(read_mlperf(path, "llama3_1-8b", tokenizer).samples) == 3
    with pytest.raises(UsageError, match="not a folder"):
        mlperf_data.find(path, "llama2-70b")
