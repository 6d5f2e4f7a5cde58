"""Training decoder language models (``train/llm``): tokens/s per device and model-FLOPs utilisation, sharded with
FSDP2. Causal-LM steps on synthetic tokens, gradient accumulation, FSDP2 or DDP across the launcher's ranks,
activation checkpointing, LoRA (``peft``) and fp8 (``torchao``); the figures are torchtitan's (docs/train.md,
Language models)."""
