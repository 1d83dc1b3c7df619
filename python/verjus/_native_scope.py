"""A ``with`` block around a scope of the native tape (a guard object with ``enter``
and ``exit``, which restores the tape's state however the block is left): the
form of ``rf.gradient_checkpoint_scope``, ``rf.stop_gradient_scope`` and
``verjus.autocast``."""

from __future__ import annotations

from types import TracebackType
from typing import Any, ClassVar

__all__ = ["NativeScope"]


class NativeScope:
    """Enters a new native guard of ``guard_type`` (made with ``args``) for the
    ``with`` block. Scopes nest; a scope belongs to the thread that enters it."""

    guard_type: ClassVar[Any]

    def __init__(self, *args: Any) -> None:
        self._guard = self.guard_type(*args)

    def __enter__(self) -> NativeScope:
        self._guard.enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._guard.exit()
