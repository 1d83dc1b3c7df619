"""Progress over the steps of an epoch, for ``Trainer.fit`` (and so ``verjus
train``) and the RF ``Engine`` alike.

On a terminal it is a tqdm bar on stderr, redrawn in place and removed when the
epoch ends. Anywhere else (a CI log, ``nohup``, a cluster's job log) a bar's
carriage returns would fill the log with redraws, and without one an epoch
printed nothing until its summary line: a log of an 11-minute epoch showed
nothing for 11 minutes (issue 39 item 14). There a plain line goes to stderr
instead, at most one every ``INTERVAL`` seconds of wall time (the environment
variable ``VERJUS_PROGRESS_INTERVAL`` overrides it; 0: a line each step), and
none in an epoch shorter than that::

    epoch 2/5: step 1200/4688 (26%), 0:05:30 elapsed, 3.64 steps/s, loss 0.4123, 466 ex/s

The text after the rate is what the bar shows after its counts. Only the
main process shows progress: the callers pass ``enabled`` false on the other
ranks.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from time import monotonic
from typing import Any

__all__ = ["INTERVAL", "INTERVAL_ENV", "EpochProgress", "hms", "line_interval"]

# Seconds of wall time between two progress lines where stderr is no terminal.
INTERVAL = 30.0
INTERVAL_ENV = "VERJUS_PROGRESS_INTERVAL"
# A bar's text after its counts is remade at most this often (seconds).
_BAR_TEXT_EVERY = 0.2
_clock = monotonic  # a name of this module's own, for tests to replace


def line_interval() -> float:
    """The seconds between two progress lines: ``VERJUS_PROGRESS_INTERVAL`` when
    set (a number >= 0; ``inf``: no lines), else ``INTERVAL``."""
    text = os.environ.get(INTERVAL_ENV, "").strip()
    if not text:
        return INTERVAL
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise ValueError(f"{INTERVAL_ENV} must be a number of seconds >= 0, got {text!r}")
    return value


def hms(seconds: float) -> str:
    """``h:mm:ss``."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class EpochProgress:
    """The steps of one epoch (or evaluation) named ``desc``, ``total`` of them
    when known: ``step(describe)`` after each, ``close()`` at the end.
    ``describe()`` gives the text after the counts (the loss); it is called
    only when that text is shown. Disabled, it shows nothing."""

    def __init__(self, desc: str, enabled: bool, total: int | None = None) -> None:
        self.desc = desc
        self.total = total
        self.steps = 0
        self.bar: Any = None
        self.interval = math.inf  # no lines
        if enabled:
            if sys.stderr.isatty():
                from tqdm.auto import tqdm

                self.bar = tqdm(
                    total=total,
                    desc=desc,
                    unit="step",
                    leave=False,
                    file=sys.stderr,
                    dynamic_ncols=True,
                )
            else:
                self.interval = line_interval()
        self.start = _clock()
        self.text_made = -math.inf  # when the bar's text was last remade
        self.printed = self.start  # when the last line was printed (none yet)
        self.quiet = self.bar is None and self.interval == math.inf

    def step(self, describe: Callable[[], str]) -> None:
        """One more step done."""
        self.steps += 1
        if self.quiet:
            return
        now = _clock()
        if self.bar is not None:
            if now - self.text_made >= _BAR_TEXT_EVERY:
                self.text_made = now
                self.bar.set_postfix_str(describe(), refresh=False)
            self.bar.update(1)
        elif now - self.printed >= self.interval:
            self.printed = now
            print(self.line(now, describe()), file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        """Seconds since the start."""
        return _clock() - self.start

    def line(self, now: float, text: str) -> str:
        """The progress line at the clock's ``now`` with ``text``."""
        count = f"step {self.steps}"
        if self.total:
            count += f"/{self.total} ({self.steps / self.total:.0%})"
        seconds = now - self.start
        rate = self.steps / max(seconds, 1e-9)
        speed = f"{rate:,.2f} steps/s" if rate >= 1 else f"{1 / rate:,.2f} s/step"
        line = f"{self.desc}: {count}, {hms(seconds)} elapsed, {speed}"
        return f"{line}, {text}" if text else line

    def close(self) -> None:
        """The end: the bar is removed (a line needs no end)."""
        if self.bar is not None:
            self.bar.close()
