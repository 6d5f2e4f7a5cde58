"""Regenerate the record fixtures in this folder: every file is the records of one REAL run of the tool on this
machine, nothing built or edited by hand.

    python tests/data/records/make.py            # every fixture (about 5 minutes on a 2-core CPU, and the
                                                 # scaling pair's waits for a quiet machine)
    python tests/data/records/make.py llm_server gemm   # only those

Each fixture is the ``results`` of ``accelbench ... --json`` (the records exactly as the store and the run folder
hold them), run from the repository root against a throwaway store and run folder (never the user's own), in a
JSON file ``NAME.json``: ``{"about", "command", "made", "records"}``. ``tags.fixture`` names the fixture in each
record. The tests (tests/test_details.py) validate every record against ``accelbench/results/result.schema.json``
and run the generic layers (compare's pairing, the judge, scaling, history, reference matching, the report) on
them.

The commands are :data:`COMMANDS` (``accelbench`` is ``python -m accelbench``); what some need:

- llm_server_tight is llm_server held to a first token in 1 ms, which no CPU serves (--ttft-ms 1 --tpot-ms 100):
  an INVALID run with LoadGen's reasons, and other limits than MLPerf's (the judge's ``unlike limits``).
- llm_prompts serves a --checkpoint folder made here (a tiny random Llama over a word-level tokenizer, saved by
  save_pretrained, as tests/test_llm_accuracy.py builds it) a prompt file of 12 questions with answers: a model of
  another size than the preset's, and a prompt file's summary.
- llm_prefix shares a 64-token prefix among three quarters of the prompts (the hit rate sent; the static engine
  reports no cache of its own); llm_trace replays a 40-row trace written here (timestamps 50 ms apart, lengths that
  vary); llm_conversations sends synthetic 3-turn
  conversations, each turn after its answer (accelbench's replay driver, not LoadGen).
- llm_closed is a closed loop of 4 users (accelbench's driver: each user's next request when its last was
  answered; its steady window); llm_sweep's points are closed loops too (a sweep made before them held Offline
  runs: tests/test_closed_loop.py reads one).
- find_peak_sleep is the harness's find-peak on the sleep backend (a system of known capacity): a real model's
  search takes minutes on this machine.
- train_scaling is the device-scaling pair (1 and 2 processes). The machine is shared, and a contended or noisy
  run says so (the judge then sets it aside, and the scaling table withholds its speedup): each try first waits
  for a quiet machine, and the pair is run again, at most SCALING_TRIES times, until the judge sets neither record
  aside, so that the pair reaches the intervals' test. The last try is kept whatever it says (and
  tests/test_details.py then fails: run it again on a quieter machine).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

LLM = "infer llama3.1-8b --scale tiny --engine static --output-tokens 8"
#: each fixture's command, after ``accelbench`` ({scratch}: the throwaway folder of the runs)
COMMANDS: dict[str, str] = {
    "llm_server": f"{LLM} --scenario server",
    "llm_server_tight": f"{LLM} --scenario server --ttft-ms 1 --tpot-ms 100",
    "llm_offline": f"{LLM} --scenario offline",
    "llm_accuracy": f"{LLM} --mode accuracy",
    "llm_sweep": f"{LLM} --mode sweep --concurrency 1,4",
    "llm_closed": f"{LLM} --concurrency 4",
    "llm_prompts": "infer llama3.1-8b --checkpoint {scratch}/ckpt --prompts {scratch}/qa.jsonl --engine static "
    "--scenario offline --output-tokens 8",
    "llm_prefix": f"{LLM} --scenario offline --prefix-tokens 64 --prefix-share 0.75",
    "llm_trace": f"{LLM} --scenario server --trace {{scratch}}/trace.jsonl",
    "llm_conversations": f"{LLM} --scenario server --source conversations --turns 3 --input-tokens 32 --batch-size 4",
    "resnet_offline": "infer resnet18 --scale tiny --scenario offline",
    "resnet_accuracy": "infer resnet18 --scale tiny --mode accuracy --precision bf16",
    "find_peak_sleep": "infer resnet18 --scale tiny --scenario server --mode find-peak --backend sleep --service-ms 2 "
    "--batch-size 8 --latency-bound-ms 20 --duration 0.5 --threads 2",
    "train_scaling": "train ncf --scale tiny --batch-size 4096 --nproc 1,2 --num-batches 200 --display-every 25 "
    "--warmup 10",
    "train_llm": "train llama3.1-8b --scale tiny --num-batches 12 --display-every 4 --warmup 2",
    "gemm": "kernels gemm --m 512 --n 512 --k 512 --min-time 0.5",
    "tta_digits": "tta digits --seeds 3",
}
#: how many times the scaling pair is run for one whose records the judge sets nothing aside of, and how long each
#: try waits for a quiet machine (the 1-minute load average under QUIET) first
SCALING_TRIES = 6
QUIET, QUIET_WAIT = 0.5, 900.0
#: the prompt file's samples (llm_prompts): a question and the answer it should get, in the tokenizer's words
QA = [
    ("what is two plus four", "two plus four be the cat"),
    ("the cat sat on a mat", "the dog ran"),
    ("hello be brief", "hello"),
    ("what sat on the mat", "a cat sat on the mat"),
] * 3
WORDS = "the cat sat on a mat what is two plus four dog ran user assistant system be brief hello"


def checkpoint(scratch: Path) -> None:
    """A save_pretrained folder (a tiny random Llama over a word-level tokenizer of WORDS) and a prompt file."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    folder = scratch / "ckpt"
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([WORDS, ":"], trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(str(folder))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )  # fmt: skip
    AutoModelForCausalLM.from_config(config).save_pretrained(str(folder))
    lines = "".join(json.dumps({"prompt": q, "output": a}) + "\n" for q, a in QA)
    (scratch / "qa.jsonl").write_text(lines, encoding="utf-8")


def trace(scratch: Path) -> None:
    """A 40-row trace in accelbench's JSONL (seconds, input and output tokens), 50 ms apart."""
    rows = [
        {"timestamp": round(0.05 * i, 3), "input_tokens": 16 + (7 * i) % 48, "output_tokens": 4 + i % 5}
        for i in range(40)
    ]
    (scratch / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def quiet() -> None:
    """Wait (at most QUIET_WAIT s) for the machine's load to fall under QUIET: other work on a shared machine makes
    a run contended, which the judge rightly sets aside."""
    deadline = time.monotonic() + QUIET_WAIT
    while os.getloadavg()[0] >= QUIET and time.monotonic() < deadline:
        time.sleep(5)


def run(name: str, args: list[str], scratch: Path) -> list[dict]:
    """The records of one run of ``accelbench ARGS`` (its --json output's ``results``)."""
    cmd = [
        sys.executable, "-m", "accelbench", *args, "--tag", f"fixture={name}", "--json",
        "--db", str(scratch / "fixtures.db"), "--out", str(scratch / "runs"),
    ]  # fmt: skip
    env = {**os.environ, "ACCELBENCH_HOME": str(scratch / "home"), "ACCELBENCH_CACHE": str(scratch / "cache")}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    try:
        return list(json.loads(done.stdout)["results"])
    except (ValueError, KeyError):
        raise SystemExit(f"{name}: exit {done.returncode}, no records\n{done.stderr[-4000:]}") from None


def clean(records: list[dict]) -> bool:
    """Whether the judge sets nothing aside of any record (contended, noisy, INVALID, no interval)."""
    sys.path.insert(0, str(ROOT))
    from accelbench.results.judge import concerns
    from accelbench.results.record import Result

    return all(not concerns(Result.from_dict(json.loads(json.dumps(d))), "throughput") for d in records)


def make(name: str, scratch: Path) -> None:
    args = shlex.split(COMMANDS[name].format(scratch=scratch))
    shown = [a.replace(str(scratch), "SCRATCH") for a in args]
    started = time.monotonic()
    if name == "llm_prompts" and not (scratch / "ckpt").is_dir():
        checkpoint(scratch)
    if name == "llm_trace":
        trace(scratch)
    tries = SCALING_TRIES if name == "train_scaling" else 1
    for attempt in range(1, tries + 1):
        if name == "train_scaling":
            quiet()
        records = run(name, args, scratch)
        if name != "train_scaling" or clean(records):
            break
        print(f"{name}: try {attempt} set aside by the judge (a shared machine); again", file=sys.stderr)
    doc = {
        "about": f"real records of 'accelbench {' '.join(shown)}' on a 2-core CPU machine, made by make.py (its "
        "docstring says how); not edited",
        "command": "accelbench " + " ".join(shown),
        "made": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "records": records,
    }
    (HERE / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{name}: {len(records)} record(s) in {time.monotonic() - started:.0f} s", file=sys.stderr)


def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        raise SystemExit(f"unknown fixtures {unknown}; known: {', '.join(COMMANDS)}")
    with tempfile.TemporaryDirectory(prefix="abfixtures-") as tmp:
        for name in names or list(COMMANDS):
            make(name, Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
