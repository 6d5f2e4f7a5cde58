"""Real prompts for a token run: a local JSONL or ShareGPT file, tokenized by the checkpoint's own tokenizer.

Random token ids measure speed but cannot be scored: an accuracy run needs text a model can answer and the answer
it should give. A sample with a reference answer asks for as many tokens as the reference has, as vLLM's
``benchmark_serving`` does. The fields read (:data:`PROMPT_KEYS`, :data:`REFERENCE_KEYS`, ShareGPT's turns) and the
tokenizing are described in ``docs/infer.md`` ("The request files, field by field"). Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Mapping, TypeVar

from accelbench.errors import UsageError
from accelbench.params import NoOptions, opt
from accelbench.results.details import Prompts
from accelbench.serve.sources.base import RunSettings, Source, Work, library_size
from accelbench.serve.sources.prefix import PrefixOptions, PrefixSummary, check_prefix, prefix_words, with_prefix
from accelbench.serve.sources.tokenizer import Writable, load_tokenizer

#: where a JSONL object's prompt is, first match wins (``input`` before ``question``: MLPerf's processed OpenOrca
#: keeps the full formatted prompt in ``input`` and the bare question in ``question``)
PROMPT_KEYS = ("prompt", "input", "question", "text")
#: where its reference answer is (optional)
REFERENCE_KEYS = ("output", "reference", "answer")
#: ShareGPT roles: who asks, who answers (the ``from`` field; ``user``/``assistant`` in some exports)
HUMAN_ROLES = ("human", "user")
GPT_ROLES = ("gpt", "assistant", "chatgpt")
FORMATS = ("auto", "jsonl", "json", "sharegpt")
#: the skip reasons a summary counts (a prompt over the limit is counted as "prompt over N tokens")
NO_PROMPT, EMPTY_PROMPT = "no prompt field", "empty prompt"
NO_TURNS, NO_HUMAN, NO_ANSWER = "no conversations list", "no human turn", "no gpt answer after the first human turn"
#: the skip reasons that are a broken row (a record not of the format, a question without its text); the others are
#: rows passed over by design (ShareGPT's conversations no human opens, questions never answered, prompts too long)
BROKEN = (NO_PROMPT, EMPTY_PROMPT, NO_TURNS)
#: the most of a file's records a run passes over as broken (:func:`check_broken`): the lengths served stand for the
#: file's only while few of its rows are missing from them, and a file a tenth of whose rows are broken is more
#: likely a wrong or damaged export (a converter that dropped the values) than a data set with a few bad rows
MOST_BROKEN = 0.1


class ReadPrompts(Prompts, total=False):
    """What a record keeps of a file of prompts a reader passed over (:class:`PromptSummary`: a prompt file's, MLPerf
    data's) beside the common keys: whether a chat template wrapped them, the records read, those skipped (how
    many for each reason, and where the first of each is), the samples with a reference answer and its lengths."""

    chat_template: bool
    read: int
    skipped: dict[str, int]
    skipped_first: dict[str, str]
    with_reference: int
    reference_tokens: dict[str, float] | None


class FilePrompts(ReadPrompts, total=False):
    """``details.prompts`` of the file source (``--prompts FILE``): what its reader keeps, how the run read the file
    (the output tokens of a sample without a reference, the caps on answers and prompts, the samples read at most)
    and the shared prefix put before the prompts, where one was asked for."""

    output_tokens_default: int
    max_output_tokens: int | None
    max_prompt_tokens: int | None
    limit: int | None
    prefix: PrefixSummary


#: the source's own ``details.prompts`` a reader's summary is written into (a prompt file's, MLPerf data's)
P = TypeVar("P", bound=ReadPrompts)


@dataclass(frozen=True)
class PromptSample:
    """One request to serve: its prompt's tokens, the answer it should give (or None), and how many to generate."""

    prompt: list[int]
    reference: str | None
    reference_tokens: int | None
    output_tokens: int


@dataclass(frozen=True)
class PromptSummary(Generic[P]):
    """What a record keeps of the prompts: which file (and its hash, so two runs can tell they read the same),
    how it was read, what was skipped and why, and the lengths served; ``settings``: how the source's caller read
    it, in the source's own type, which :meth:`to_dict` completes."""

    file: str
    sha256: str
    format: str
    chat_template: bool
    read: int  # records read (objects or conversations), before skipping
    samples: int
    skipped: dict[str, int]
    prompt_tokens: dict[str, float]  # mean, min, max
    reference_tokens: dict[str, float] | None  # over the samples with a reference; None when none has one
    output_tokens: dict[str, float]
    with_reference: int
    #: the caller's output tokens, caps and limit (a prompt file's :class:`FilePrompts`, MLPerf data's own)
    settings: P
    #: where the first record skipped for each reason is ("line 7" of JSONL, "item 7" of a JSON list)
    skipped_first: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> P:
        """``details.prompts`` of the source (less its ``source``): the settings, and what the reader kept."""
        out = self.settings.copy()
        out["file"] = self.file
        out["sha256"] = self.sha256
        out["format"] = self.format
        out["chat_template"] = self.chat_template
        out["read"] = self.read
        out["samples"] = self.samples
        out["skipped"] = dict(self.skipped)
        out["skipped_first"] = dict(self.skipped_first)
        out["with_reference"] = self.with_reference
        out["prompt_tokens"] = dict(self.prompt_tokens)
        out["reference_tokens"] = dict(self.reference_tokens) if self.reference_tokens else None
        out["output_tokens"] = dict(self.output_tokens)
        return out


@dataclass(frozen=True)
class PromptSet(Generic[P]):
    """The samples to serve, in file order, and the summary a record keeps (``summary.to_dict()``)."""

    samples: list[PromptSample]
    summary: PromptSummary[P]

    @property
    def prompts(self) -> list[list[int]]:
        return [s.prompt for s in self.samples]

    @property
    def output_tokens(self) -> list[int]:
        return [s.output_tokens for s in self.samples]


@dataclass
class Skips:
    """The records a reader passed over: how many for each reason, and where the first of each is."""

    counts: Counter[str] = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)

    def add(self, reason: str, where: str) -> None:
        self.counts[reason] += 1
        self.first.setdefault(reason, where)


def skipped_line(summary: Mapping[str, Any], noun: str) -> str | None:
    """What a run says of the records its file's reader passed over, from the summary a record keeps
    (``skipped 1 of 38 conversations: empty prompt (line 7)``), or None where none was; ``noun``: what a record
    of the file is (prompts, conversations). Conversations cut short at a broken turn are said after."""
    parts = _counted(summary.get("skipped") or {}, summary.get("skipped_first") or {})
    cut = _counted(summary.get("cut_short") or {}, summary.get("cut_short_first") or {})
    if not parts and not cut:
        return None
    said = []
    if parts:
        said.append(f"skipped {sum((summary.get('skipped') or {}).values())} of {summary['read']} {noun}: {parts}")
    if cut:
        total = sum((summary.get("cut_short") or {}).values())
        said.append(f"{total} of {summary['read']} {noun} cut short at a later turn: {cut}")
    return "; ".join(said)


def check_broken(summary: Mapping[str, Any], noun: str, what: str) -> None:
    """One line (a UsageError) where more than :data:`MOST_BROKEN` of the records read are broken (:data:`BROKEN`,
    and conversations cut short at a broken turn), naming the file and the first broken row; ``what``: the file's
    kind in the message (prompt file, conversation file)."""
    skipped, first = summary.get("skipped") or {}, dict(summary.get("skipped_first") or {})
    broken = {reason: n for reason, n in skipped.items() if reason in BROKEN}
    cut, cut_first = summary.get("cut_short") or {}, summary.get("cut_short_first") or {}
    count, read = sum(broken.values()) + sum(cut.values()), int(summary["read"])
    if count <= MOST_BROKEN * read:
        return
    places = [first[r] for r in first if r in broken] + [cut_first[r] for r in cut_first]
    earliest = min(places, key=_place_number)
    kinds = [f"{n} {r}" for r, n in broken.items()] + [f"{n} cut short ({r} in a later turn)" for r, n in cut.items()]
    why = ", ".join(kinds)
    raise UsageError(
        f"{what} {summary['file']}: {count} of {read} {noun} are broken ({why}; the first at {earliest}), more than "
        f"the {MOST_BROKEN:.0%} a run passes over: fix or remove those rows"
    )


def _counted(counts: dict[str, int], first: dict[str, str]) -> str:
    """``empty prompt (line 7)`` for one record, ``2 empty prompt (first at line 7)`` for more, joined."""
    parts = []
    for reason, n in counts.items():
        where = first.get(reason)
        if n == 1 and len(counts) == 1:
            parts.append(f"{reason} ({where})" if where else reason)
        else:
            parts.append(f"{n} {reason}" + (f" ({'first at ' * (n > 1)}{where})" if where else ""))
    return ", ".join(parts)


def _place_number(where: str) -> int:
    """The number of a record's place ("line 7", "item 7"): places of one file compare by it."""
    return int(where.rsplit(" ", 1)[-1])


def read_prompts(
    path: str | Path,
    tokenizer: Any,
    *,
    output_tokens: int,
    max_output_tokens: int | None = None,
    max_prompt_tokens: int | None = None,
    chat_template: bool | None = None,
    fmt: str = "auto",
    limit: int | None = None,
) -> PromptSet[FilePrompts]:
    """The file's usable samples, in file order, tokenized by ``tokenizer``.

    ``output_tokens``: generated for a sample without a reference; one with a reference generates the
    reference's token count. Either is capped at ``max_output_tokens``. A prompt longer than
    ``max_prompt_tokens`` is skipped and counted. ``chat_template``: None applies the tokenizer's template when
    it has one. ``limit``: stop after this many usable samples (a 90,000-conversation ShareGPT file need not be
    tokenized whole for a run of 1,024).
    """
    if output_tokens < 1:
        raise UsageError(f"output tokens must be at least 1, not {output_tokens}")
    if max_output_tokens is not None and max_output_tokens < 1:
        raise UsageError(f"the most output tokens must be at least 1, not {max_output_tokens}")
    if max_prompt_tokens is not None and max_prompt_tokens < 1:
        raise UsageError(f"the most prompt tokens must be at least 1, not {max_prompt_tokens}")
    if limit is not None and limit < 1:
        raise UsageError(f"the number of prompts must be at least 1, not {limit}")
    if fmt not in FORMATS:
        raise UsageError(f"prompt file format {fmt!r} is not one of {', '.join(FORMATS)}")
    use_template = template_choice(tokenizer, chat_template, "prompts")
    file = Path(path).expanduser()
    container, records, digest, places = json_records(file, fmt)
    if not records:
        raise UsageError(f"prompt file {file} is empty: give one JSON object a line, or a ShareGPT JSON list")
    kind = "sharegpt" if fmt == "sharegpt" or (fmt == "auto" and _is_conversation(records)) else "records"
    if kind == "records":
        _check_prompt_field(file, records)
    cap = max_output_tokens
    samples: list[PromptSample] = []
    skips = Skips()
    read = 0
    for record, place in zip(records, places, strict=True):
        if limit is not None and len(samples) >= limit:
            break
        read += 1
        pair = _conversation_pair(record) if kind == "sharegpt" else _record_pair(record)
        if isinstance(pair, str):
            skips.add(pair, place)
            continue
        prompt_text, reference = pair
        prompt = _prompt_ids(tokenizer, prompt_text, use_template)
        if max_prompt_tokens is not None and len(prompt) > max_prompt_tokens:
            skips.add(f"prompt over {max_prompt_tokens} tokens", place)
            continue
        ref_tokens = len(tokenizer(reference, add_special_tokens=False)["input_ids"]) if reference else 0
        if not ref_tokens:  # absent, or only whitespace a tokenizer drops: nothing to count or score against
            reference = None
        out = ref_tokens or output_tokens
        samples.append(PromptSample(prompt, reference, ref_tokens or None, min(out, cap) if cap else out))
    if not samples:
        why = ", ".join(f"{n} {reason}" for reason, n in skips.counts.most_common()) or "no records"
        raise UsageError(f"prompt file {file} has no usable samples ({why})")
    name = "sharegpt" if kind == "sharegpt" else container
    settings: FilePrompts = {
        "output_tokens_default": output_tokens,
        "max_output_tokens": max_output_tokens,
        "max_prompt_tokens": max_prompt_tokens,
        "limit": limit,
    }
    summary = _summary(file, digest, name, use_template, read, samples, skips.counts, settings, skips.first)
    return PromptSet(samples, summary)


def template_choice(tokenizer: Any, asked: bool | None, what: str) -> bool:
    """Whether ``what`` (prompts, conversations) go through the tokenizer's chat template: as ``asked``, or where
    it has one when not asked; asked for one it lacks is one line."""
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if asked and not has_template:
        raise UsageError(f"the checkpoint's tokenizer has no chat template: read the {what} without one")
    return has_template if asked is None else asked


def json_records(
    file: Path, fmt: str, noun: str = "prompt file", give: str = "give a JSONL or ShareGPT JSON file"
) -> tuple[str, list[Any], str, list[str]]:
    """The file's JSON objects, whether a list (``json``) or lines (``jsonl``), its sha256, and where each object
    is (``line 7`` of JSONL, blank lines counted as an editor counts them; ``item 7`` of a list), so a row skipped
    can be found; ``noun`` and ``give`` say what the file is and what to give instead in a message (a conversation
    file reads the same way)."""
    if not file.is_file():
        raise UsageError(f"{noun} {file} does not exist: {give}")
    data = file.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UsageError(f"{noun} {file} is not UTF-8 text (byte {e.start}): {give}") from e
    as_list = text.lstrip().startswith("[") if fmt in ("auto", "sharegpt") else fmt == "json"
    if as_list:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"{noun} {file} is not JSON: line {e.lineno}: {e.msg}") from e
        if not isinstance(value, list):
            raise UsageError(f"{noun} {file} is JSON but not a list: give a list of objects, or JSONL")
        _check_objects(file, value, lambda i: f"item {i + 1}", noun)
        return "json", value, digest, [f"item {i + 1}" for i in range(len(value))]
    records, lines = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise UsageError(
                f"{noun} {file} is not JSONL: line {number} is not JSON ({e.msg}); give one object a line"
            ) from e
        lines.append(number)
    _check_objects(file, records, lambda i: f"line {lines[i]}", noun)
    return "jsonl", records, digest, [f"line {n}" for n in lines]


def _check_objects(file: Path, records: list[Any], where: Any, noun: str = "prompt file") -> None:
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise UsageError(f"{noun} {file}: {where(i)} is a JSON {type(record).__name__}, not an object")


def _is_conversation(records: list[Any]) -> bool:
    return bool(records) and "conversations" in records[0]


def _check_prompt_field(file: Path, records: list[dict[str, Any]]) -> None:
    """A file none of whose objects has a prompt field is the wrong file (or the wrong keys), not a file whose
    samples all happen to be unusable: say which keys it has."""
    if any(any(k in r for k in PROMPT_KEYS) for r in records):
        return
    keys = sorted({k for r in records[:100] for k in r})
    found = ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "") if keys else "none"
    raise UsageError(f"prompt file {file} has no prompt field ({', '.join(PROMPT_KEYS)}); its keys: {found}")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _record_pair(record: dict[str, Any]) -> tuple[str, str | None] | str:
    """(prompt, reference) of a JSONL object, or why it is skipped."""
    key = next((k for k in PROMPT_KEYS if k in record), None)
    if key is None:
        return NO_PROMPT
    prompt = _text(record[key])
    if prompt is None:
        return EMPTY_PROMPT
    ref_key = next((k for k in REFERENCE_KEYS if k in record), None)
    return prompt, _text(record[ref_key]) if ref_key else None


def _conversation_pair(record: dict[str, Any]) -> tuple[str, str | None] | str:
    """(first human turn, the gpt turn right after it) of a ShareGPT conversation, or why it is skipped."""
    turns = record.get("conversations")
    if not isinstance(turns, list):
        return NO_TURNS
    roles = [t.get("from") if isinstance(t, dict) else None for t in turns]
    first = next((i for i, r in enumerate(roles) if r in HUMAN_ROLES), None)
    if first is None:
        return NO_HUMAN
    prompt = _text(turns[first].get("value"))
    if prompt is None:
        return EMPTY_PROMPT
    if first + 1 >= len(turns) or roles[first + 1] not in GPT_ROLES:
        return NO_ANSWER
    answer = _text(turns[first + 1].get("value"))
    if answer is None:
        return NO_ANSWER
    return prompt, answer


def _prompt_ids(tokenizer: Any, text: str, template: bool) -> list[int]:
    if template:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
        return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    return list(tokenizer(text)["input_ids"])


def _stats(values: list[int]) -> dict[str, float]:
    return {"mean": round(sum(values) / len(values), 2), "min": min(values), "max": max(values)}


def _summary(
    file: Path,
    digest: str,
    fmt: str,
    template: bool,
    read: int,
    samples: list[PromptSample],
    skipped: Counter[str],
    settings: P,
    skipped_first: dict[str, str] | None = None,
) -> PromptSummary[P]:
    refs = [s.reference_tokens for s in samples if s.reference_tokens]
    return PromptSummary(
        file=str(file),
        sha256=digest,
        format=fmt,
        chat_template=template,
        read=read,
        samples=len(samples),
        skipped=dict(skipped.most_common()),
        prompt_tokens=_stats([len(s.prompt) for s in samples]),
        reference_tokens=_stats(refs) if refs else None,
        output_tokens=_stats([s.output_tokens for s in samples]),
        with_reference=len(refs),
        settings=settings,
        skipped_first=dict(skipped_first or {}),
    )


def from_params(params: Any, options: Any, output_tokens: int, limit: int) -> tuple[Any, PromptSet[FilePrompts]]:
    """``--prompts`` read as a run reads it (``--tokenizer``'s or ``--checkpoint``'s tokenizer, ``--output-tokens``
    as the cap and ``--input-tokens`` as the longest prompt when given, ``--chat-template``; ``options``: the file
    source's settings): the same call validates the file before any model is built (a bad file is one line, exit 2)
    and feeds the run; a file with too many broken rows is refused (:func:`check_broken`). The tokenizer, and the
    set."""
    if not params.tokenizer_dir:
        raise UsageError("--prompts needs --checkpoint DIR: its tokenizer turns the prompts into tokens")
    tokenizer = load_tokenizer(params.tokenizer_dir)
    read = read_prompts(
        options.prompts,
        tokenizer,
        output_tokens=output_tokens,
        max_output_tokens=params.output_tokens or None,
        max_prompt_tokens=params.input_tokens or None,
        chat_template=options.template,
        limit=limit,
    )
    check_broken(read.summary.to_dict(), record_noun(read.summary.format), "prompt file")
    return tokenizer, read


def record_noun(fmt: str) -> str:
    """What one record of a prompt file of format ``fmt`` is, in a line that counts them."""
    return "conversations" if fmt == "sharegpt" else "prompts"


@dataclass(frozen=True)
class TemplateOptions(NoOptions):
    chat_template: str = opt(
        "auto", "wrap each prompt read from a file in the tokenizer's chat template: auto, on, off", sweep=False
    )

    def check(self) -> None:
        if self.chat_template not in ("auto", "on", "off"):
            raise UsageError(f"--chat-template is auto, on or off, not {self.chat_template!r}")

    @property
    def template(self) -> bool | None:
        return {"auto": None, "on": True, "off": False}[self.chat_template]


@dataclass(frozen=True)
class FileOptions(PrefixOptions, TemplateOptions):
    prompts: str = opt(
        "",
        'a JSONL ({"prompt": ..., "output": ...} a line) or ShareGPT file, tokenized by --checkpoint\'s tokenizer; '
        "a sample with a reference answer generates its length",
        sweep=False,
        metavar="FILE",
    )

    def check(self) -> None:
        PrefixOptions.check(self)
        TemplateOptions.check(self)


class FileSource(Source):
    name = "file"
    about = "--prompts"
    Options = FileOptions

    @classmethod
    def check_run(cls, params: RunSettings, options: FileOptions) -> None:
        check_prefix(params.mode, options)
        if not options.prompts:
            raise UsageError("--source file reads --prompts FILE: give the file")
        if not params.tokenizer_dir:
            raise UsageError("--prompts needs --checkpoint DIR: its tokenizer turns the prompts into tokens")
        file = Path(options.prompts).expanduser()
        if not file.is_file():
            what = "is a folder" if file.is_dir() else "does not exist"
            raise UsageError(f"prompt file {options.prompts} {what}: give a JSONL or ShareGPT JSON file")
        from accelbench.serve.limits import DEFAULT_LENGTHS

        default_out = DEFAULT_LENGTHS["tiny" if params.scale == "tiny" else "full"][1]
        # a bad file: one line; one with rows skipped says how many and where, once, before anything runs
        read = from_params(params, options, params.output_tokens or default_out, library_size(params))[1]
        tell_skipped(read.summary.to_dict(), record_noun(read.summary.format))

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        o: FileOptions = self.options
        tokenizer, read = from_params(params, o, lengths[1], total)
        samples = read.samples
        prompts = [s.prompt for s in samples]
        outs = [max(s.output_tokens, 2) for s in samples]  # a second token: TPOT needs one
        summary: FilePrompts = {"source": self.name, **read.summary.to_dict()}
        if o.prefix_tokens:  # the prefix in tokens the prompt's text holds, as the file's own are
            import numpy as np

            ids, rng = Writable(tokenizer, vocab), np.random.default_rng(2)
            made = with_prefix(
                prompts, o.prefix_tokens, o.prefix_share, o.prefix_groups, ids.vocab, keep=tokenizer.bos_token_id,
                replace=False, written=lambda drawn: ids.settled(ids.written(drawn), rng),
            )  # fmt: skip
            prompts, summary["prefix"] = made.prompts, made.summary
        references = [s.reference for s in samples]
        return Work.single(prompts, outs, summary, tokenizer, references, shared_prefix=bool(o.prefix_tokens))

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        return [f"prompts {Path(str(settings.get('prompts', ''))).name}", *prefix_words(settings)]


#: the skip lines said in this process: a run's parameters are checked several times before it starts (its entry,
#: its plan, its estimate), and each check reads the file again
_TOLD: set[str] = set()


def tell_skipped(summary: Mapping[str, Any], noun: str) -> None:
    """Say on the console (standard error) the rows a file's reader passed over and where, once a process: the
    parameters' check reads the file before anything runs, so the line comes before the run's progress, and a
    worker's check writes it to the entry's log. The record keeps the counts (``details.prompts.skipped``)."""
    line = skipped_line(summary, noun)
    if line is None:
        return
    line = f"accelbench: {summary.get('file')}: {line}"
    if line not in _TOLD:
        _TOLD.add(line)
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
