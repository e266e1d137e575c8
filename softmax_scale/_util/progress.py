"""One progress bar for the whole package: a tqdm bar on a terminal, plain lines elsewhere.

On a terminal the bar redraws in place.  When standard error is a file or a pipe (a log, CI),
a redrawn bar writes a cursor escape per update (26 KB for one figure run); there the same
call prints one plain line every ``interval`` seconds and one at the end instead.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

__all__ = ["progress_bar"]

#: Seconds between two plain lines when standard error is not a terminal.
LINE_INTERVAL = 30.0


class _Lines(tqdm):
    """tqdm that prints whole lines (no carriage returns), at most one per ``mininterval``."""

    def display(self, msg=None, pos=None):
        if msg == "":  # tqdm clears the line on close; nothing to clear (False: no carriage return)
            return False
        self.fp.write((msg if msg is not None else self.__str__()) + "\n")
        self.fp.flush()
        self._shown = self.n
        return True

    def close(self):
        # the final state, unless the last line printed already shows it (a bar that starts complete)
        if not self.disable and getattr(self, "_shown", None) != self.n:  # tqdm disables a bar once it is closed
            self.display()
        super().close()


def _interactive(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar(iterable=None, *, total=None, desc=None, disable=False, leave=False, **kwargs):
    """A progress bar over ``iterable`` (or a manual one with ``total``), like ``tqdm``.

    Parameters
    ----------
    iterable : iterable, optional
        What to iterate over.
    total : int, optional
        Number of steps, for a manual bar (``update``) or an iterable without ``len``.
    desc : str, optional
        Label.
    disable : bool
        No output at all.
    leave : bool
        Keep the finished bar on a terminal.
    **kwargs
        Passed to ``tqdm`` (``unit``, ``initial``, ``postfix``, ...).

    Returns
    -------
    tqdm
        Use as tqdm: iterate, ``update``, ``set_postfix``, ``close`` or ``with``.
    """
    stream = kwargs.pop("file", sys.stderr)
    if disable or _interactive(stream):
        return tqdm(iterable, total=total, desc=desc, disable=bool(disable), leave=leave, file=stream, **kwargs)
    return _Lines(iterable, total=total, desc=desc, file=stream, leave=False, mininterval=LINE_INTERVAL,
                  maxinterval=LINE_INTERVAL, ascii=True, dynamic_ncols=False, ncols=100, **kwargs)
