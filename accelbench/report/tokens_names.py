"""How a served run is named on the language models' tables and charts alike, so that a run reads the same in a
table's row as in a chart's legend: a name cut to the words that set it apart (:func:`shorten`), a machine by its
shortest distinguishing tag (:func:`system_tags`), the latency limits in words (:func:`limits`) and the order its
scenario lists it in (:func:`order`)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Sequence
from urllib.parse import urlsplit

from accelbench.results.details import held_to, limits_of
from accelbench.results.record import Result

#: a workload's words that tell a reader nothing: an endpoint's precision is its server's own, not stated
NOISE = frozenset({"unstated"})
#: the words of a workload's or series' name that read only together, each phrase taken out of a label whole or
#: not at all: the machine a series ran on (its last words), a conversation's turns, the lengths, a setting and its
#: value (a served model, a prompt file, a trace, a checkpoint, a shared prefix, a server's URL)
PHRASE = re.compile(
    r" on .+$|conversations of \d+ turns|\d+/\d+ tokens|(?:serving|prompts|trace|checkpoint|prefix|at) \S+|\S+"
)
#: a prompt/output length pair ('128/8'): a word with a slash that is not a path
_PAIR = re.compile(r"\d+/\d+")


def short_word(word: str) -> str:
    """A path as its last part ('/home/me/models/tiny-llama': 'tiny-llama'), a URL as its host and port; any other
    word as it is. A full local path is most of a label's width and tells runs apart by its last part alone."""
    if "://" in word:
        return urlsplit(word).netloc or word
    if "/" in word and not _PAIR.fullmatch(word) and (word.startswith(("/", "~", ".")) or word.count("/") > 1):
        return PurePosixPath(word).name or word
    return word


def shorten(names: Sequence[str]) -> tuple[str, list[str], dict[str, str]]:
    """What every name shares (for a caption to say once), each name's own words, and each path or URL shortened
    (short: whole, for the caption). A phrase (:data:`PHRASE`) is one word here, so that '3 turns' never loses its
    'turns' to a name of 6; words are shortened (:func:`short_word`) and :data:`NOISE` dropped; with one
    name, or where taking the shared words away would make two names read alike, each keeps all its words; a
    name with no word of its own keeps all of them."""
    whole: dict[str, str] = {}
    words: list[list[str]] = []
    for n in names:
        kept = []
        for phrase in (m.group().strip() for m in PHRASE.finditer(n)):
            if phrase in NOISE:
                continue
            parts = []
            for w in phrase.split(" "):
                short = short_word(w)
                if short != w:
                    whole[short] = w
                parts.append(short)
            kept.append(" ".join(parts))
        words.append(kept)
    full = [" ".join(w) for w in words]
    if len(set(full)) < 2:
        return "", full, whole
    shared = set(words[0]).intersection(*words[1:])
    own = [" ".join(w for w in ws if w not in shared) or f for ws, f in zip(words, full, strict=True)]
    if len(set(zip(full, own, strict=True))) != len(set(own)):  # two names would read alike without the shared words
        return "", full, whole
    return " ".join(w for w in words[0] if w in shared), own, whole


def system_tags(labels: dict[str, str]) -> dict[str, str]:
    """Each system's shortest label a chart can tell it apart by: the part before its parenthesis where those
    differ ('4x NVIDIA H100'), else the parenthesis ('vm 1a6a60' of 'AMD EPYC, 2 cores (vm 1a6a60)': the
    report adds it where two machines' labels collide), else the whole label."""
    heads = {fp: label.split(" (")[0] for fp, label in labels.items()}
    tails = {fp: label[label.find("(") + 1 : -1] if label.endswith(")") else label for fp, label in labels.items()}
    for tags in (heads, tails):
        if len(set(tags.values())) == len(labels):
            return tags
    return dict(labels)


def tagged(names: Sequence[str], recs: Sequence[Result], labels: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """``names`` (each ending ' on SYSTEM' where the report covers several systems) with each system's label
    replaced by its tag (:func:`system_tags`), and each tag that stands for a longer label (tag: label)."""
    if len(labels) < 2:
        return list(names), {}
    tags = system_tags(labels)
    out = [
        n.replace(f" on {labels[r.fingerprint]}", f" on {tags[r.fingerprint]}")
        for n, r in zip(names, recs, strict=True)
    ]
    return out, {
        tags[r.fingerprint]: labels[r.fingerprint] for r in recs if tags[r.fingerprint] != labels[r.fingerprint]
    }


def shared_words(shared: str, whole: dict[str, str], what: str = "run") -> str:
    """' Every run here: llama3.1-8b quick tiny; tiny-llama is /home/me/models/tiny-llama.': a caption's words
    for what :func:`shorten` took out of the labels."""
    words = f" Every {what} here: {shared}." if shared else ""
    if whole:
        words += " " + "; ".join(f"{short} is {full}" for short, full in whole.items()) + "."
    return words


#: the scenarios in the order their rows are listed (any other after them)
ORDER = ("offline", "server", "interactive", "singlestream", "concurrency")


def order(r: Result) -> tuple[int, str]:
    """A run's place in a table or chart: by its scenario (:data:`ORDER`), then its model."""
    scenario = str(r.params.get("scenario", ""))
    return (ORDER.index(scenario) if scenario in ORDER else len(ORDER), str(r.params.get("model", "")))


def limits(r: Result) -> tuple[str, str]:
    """'2,000 / 100 ms' (p99 TTFT / TPOT) and where the limits came from; blank where the run had none."""
    lim, pair = limits_of(r), held_to(r)
    if lim is None or pair is None:
        return "", ""
    words = " / ".join(f"{x:,.4g}" if x is not None else "-" for x in pair)
    return f"{words} ms", str(lim.get("source") or "source not recorded")
