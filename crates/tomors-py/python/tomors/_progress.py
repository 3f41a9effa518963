"""Progress reporting: a user callback ``progress(done, total)`` and, with
``verbose=True``, a tqdm bar when tqdm is installed."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional

Callback = Callable[[int, int], object]


@contextlib.contextmanager
def reporter(
    progress: Optional[Callback], verbose: bool, desc: str, unit: str
) -> Iterator[Optional[Callback]]:
    """The callback handed to the library (None when nobody listens)."""
    if progress is not None and not callable(progress):
        raise TypeError("progress must be a callable progress(done, total)")
    bar = None
    if verbose:
        try:
            from tqdm.auto import tqdm
        except ImportError:  # tqdm is optional
            tqdm = None
        if tqdm is not None:
            bar = tqdm(desc=desc, unit=unit)
    if bar is None and progress is None:
        yield None
        return

    def report(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()
        if progress is not None:
            progress(done, total)

    try:
        yield report
    finally:
        if bar is not None:
            bar.close()
