"""A ``--checkpoint`` state_dict, read the one way: as weights only, in accelbench's words where it cannot be.

Read when the flags are checked (memory-mapped: no copy of the weights), so that a wrong file is bad input, one
line and exit 2, not a failed record after a model was built; and read again when the model is built. torch's
own message for an unreadable file advises ``weights_only=False``, which runs whatever code the file holds: it
is never repeated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbench.errors import UsageError

FIX = "give a state_dict saved with torch.save(model.state_dict(), PATH)"


def read_state_dict(path: Path) -> dict[str, Any]:
    """The tensors of ``path`` by name (a checkpoint's ``state_dict`` entry where it wraps one)."""
    import torch

    if not path.is_file():
        raise UsageError(f"checkpoint {path} {'is a folder' if path.is_dir() else 'does not exist'}: {FIX}")
    try:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # not the zip format mmap needs: an older torch.save, read whole
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any reason the file is not weights is the same bad input
        raise UsageError(
            f"checkpoint {path} is not weights torch can read safely ({type(exc).__name__}): {FIX}"
        ) from None
    if not isinstance(state, dict):
        raise UsageError(f"checkpoint {path} holds a {type(state).__name__}, not a state_dict: {FIX}")
    inner = state.get("state_dict")
    return inner if isinstance(inner, dict) else state
