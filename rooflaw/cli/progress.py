"""Progress bars for long commands: a ``progress(done, total)`` callback the CLI hands to the core (which never
imports rich)."""

from __future__ import annotations

from typing import Any


class ProgressBar:
    """A transient rich progress bar driven by ``bar(done, total)``; starts on the first call, stops at the end
    (or on :meth:`close`, which is safe to call twice)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._bar: Any = None
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            from rich.progress import Progress

            self._bar = Progress(transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.title, total=total, completed=done)
        self._bar.update(self._task, completed=done, total=total)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
