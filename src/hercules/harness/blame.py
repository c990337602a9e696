"""Whose code an exception in a worker came from: the evaluated code's, or Hercules' own.

A worker runs two kinds of code: foreign code (the candidate's, or the problem's in the reference
worker) and the harness's own (packing, comparing, timing, tracing). An exception in the harness's
own code says nothing about the candidate, so it must never become the candidate's verdict: 14 of
24 released CUDA-L1 kernels were once judged ``runtime_error`` because the harness itself raised
after their (correct) forward had returned.

The rule reads the traceback, which the raising code cannot forge after the fact: an exception is
the foreign code's when any frame it passed through belongs to it, that is, when the frame's code
comes from the foreign file, or the frame is a method running on the foreign model (an
``nn.Module`` whose ``forward`` is inherited runs only torch's frames, with ``self`` the model), or
the exception is a ``SyntaxError`` in the foreign file. Requests whose whole purpose is running
foreign code (import, build, setup) blame it for anything they raise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

FOREIGN = "foreign"
HARNESS = "harness"


@dataclass(frozen=True)
class ForeignCode:
    """What counts as the evaluated code's in one worker: its source's file names and live objects."""

    files: frozenset[str] = frozenset()
    objects: tuple[Any, ...] = ()

    def owns_frame(self, filename: str, receiver: Any) -> bool:
        return filename in self.files or any(receiver is obj for obj in self.objects if obj is not None)


def _frames(tb: TracebackType | None) -> Iterable[tuple[str, Any]]:
    while tb is not None:
        frame = tb.tb_frame
        yield frame.f_code.co_filename, frame.f_locals.get("self")
        tb = tb.tb_next


def owner(exc: BaseException, foreign: ForeignCode, whole_request_is_foreign: bool = False) -> str:
    """``FOREIGN`` when the exception came through the evaluated code, ``HARNESS`` otherwise.

    Only the exception's own traceback counts, not its chain: a library that re-raises (``raise X
    from e``) does so below the foreign frame that called it, so that frame is in the traceback
    anyway, while the harness's own bug in a handler of a foreign exception stays the harness's."""
    if whole_request_is_foreign:
        return FOREIGN
    if isinstance(exc, SyntaxError) and exc.filename in foreign.files:
        return FOREIGN
    if any(foreign.owns_frame(name, receiver) for name, receiver in _frames(exc.__traceback__)):
        return FOREIGN
    return HARNESS
