"""LoadGen's query sample library: inputs made when LoadGen loads a sample, dropped when it unloads it."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

#: what the library holds per sample: a model's inputs (``Inputs``), a prompt's tokens
S = TypeVar("S")


class SampleLibrary(Generic[S]):
    def __init__(self, make_input: Callable[[int], S], total: int) -> None:
        self.make_input = make_input
        self.total = total
        self.loaded: dict[int, S] = {}

    def load(self, indices: list[int]) -> None:
        for i in indices:
            self.loaded[i] = self.make_input(i)

    def unload(self, indices: list[int]) -> None:
        for i in indices:
            self.loaded.pop(i, None)
