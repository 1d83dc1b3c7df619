"""Recurrent computation in RF, in two styles over the same autograd tape.

- RETURNN's functional loops (``verjus.rf.loop.functional``): ``scan`` and
  ``while_loop``, which thread the state through a ``body`` function;
- this project's ``Loop`` / ``State`` design (``verjus.rf.loop.context``,
  ``verjus.rf.loop.state``): the body is written inline in a ``with Loop() as
  loop: for _ in loop:`` block, reads frames with ``loop.unstack``, collects
  outputs with ``loop.stack`` / ``loop.last``, ends entries with ``loop.end``,
  and keeps recurrent state in ``State`` objects that any module called in the
  body can ``get`` / ``assign`` without the caller threading it.

Both run eagerly: every step's ops are on the tape, so gradients flow back
through all steps.
"""

from verjus.rf.loop.context import Loop, LoopOutput
from verjus.rf.loop.functional import scan, while_loop
from verjus.rf.loop.state import State

__all__ = ["Loop", "LoopOutput", "State", "scan", "while_loop"]
