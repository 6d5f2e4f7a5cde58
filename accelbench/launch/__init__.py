"""How a benchmark is launched: in one process, or over several with torchrun."""
