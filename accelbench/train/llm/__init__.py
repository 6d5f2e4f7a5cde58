"""Training decoder language models: tokens/s per device and model-FLOPs utilisation, sharded with FSDP2.

The benchmark ``train/llm``: ``accelbench train llama3.1-8b`` lands here (a decoder preset's
``ModelInfo.serving`` is ``"tokens"``, :meth:`~accelbench.train.llm.specs.LLMTrainParams.takes_model`):
causal-LM steps on synthetic tokens over a sequence length, gradient accumulation, FSDP2 or DDP across the
launcher's ranks, activation checkpointing, LoRA through ``peft`` and fp8 through ``torchao`` where the device
has it. The figures are torchtitan's: tokens/s, tokens/s per device, MFU against the device's dense peak.
"""
