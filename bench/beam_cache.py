"""How much does incremental decoding save the translation recipes' evaluation?

MLPerf counts evaluation time in the time to target, and a translation evaluation is beam search over the whole
test set. This times the recipes' own beam search (4 beams, alpha 0.6, as the Transformer's; 5 for GNMT) on the
same model, weights and source batch, two ways, alternated over ``--rounds`` rounds and the medians compared:

* incremental: the model's ``encode``/``step``/``reorder`` (the source encoded once; the Transformer's
  self-attention keys and values cached, GNMT's LSTM states carried): what the recipes run;
* whole prefix: the same model behind a wrapper without those methods, so every step re-encodes the source and
  re-decodes the whole prefix (what beam search did before it decoded incrementally).

Both must produce the same translations (checked each round); the weights are random, so the length of every
hypothesis is the ``--max-len`` cap unless a beam ends early, which is what an untrained model's evaluation does.

    python bench/beam_cache.py --model transformer --scale full --sentences 16 --max-len 40
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from accelbench.tta.recipes.beam import beam_search
from accelbench.workloads import workload_class


class Whole(torch.nn.Module):
    """The same weights without the incremental methods: beam search falls back to the whole-prefix decode."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.inner(*args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("transformer", "gnmt"), default="transformer")
    ap.add_argument("--scale", choices=("full", "tiny"), default="full")
    ap.add_argument("--sentences", type=int, default=16)
    ap.add_argument("--source-len", type=int, default=24)
    ap.add_argument("--max-len", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's choice)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = workload_class(a.model)().build(a.scale).eval()
    vocab = model.embed.num_embeddings if hasattr(model, "embed") else model.src_embed.num_embeddings
    src = torch.randint(4, vocab, (a.sentences, a.source_len))
    src[::2, a.source_len * 2 // 3 :] = 0  # half the sentences shorter, padded
    beams = 4 if a.model == "transformer" else 5
    times: dict[str, list[float]] = {"incremental": [], "whole prefix": []}
    with torch.no_grad():
        for _ in range(a.rounds):
            out = {}
            for name, net in (("incremental", model), ("whole prefix", Whole(model))):
                t0 = time.perf_counter()
                out[name] = beam_search(net, src, src == 0, 1, 2, a.max_len, beams, 0.6)
                times[name].append(time.perf_counter() - t0)
            assert out["incremental"] == out["whole prefix"], "the two decodes disagree"
    inc, whole = (statistics.median(times[k]) for k in ("incremental", "whole prefix"))
    print(f"{a.model} {a.scale}: {a.sentences} sentences x {beams} beams, up to {a.max_len} tokens, {a.rounds} rounds")
    print(f"  incremental  median {inc:.3f} s  ({a.sentences / inc:.1f} sentences/s)")
    print(f"  whole prefix median {whole:.3f} s  ({a.sentences / whole:.1f} sentences/s)")
    print(f"  speed-up {whole / inc:.2f}x (same translations)")


if __name__ == "__main__":
    main()
