"""Public error types. Every message is one line and names the offending field and value."""

from __future__ import annotations


class RooflawError(ValueError):
    """Bad input: the message names the field and the bad value (CLI exit code 2)."""


class RooflawWarning(UserWarning):
    """A stated assumption a run rests on (a fallback for a figure the device does not give); the CLI prints each
    one once, as one line, after a successful command."""


class Infeasible(RooflawError):
    """No candidate meets the budget (CLI exit code 3).

    ``binding`` names the constraint that cannot be met, ``smallest`` is the smallest achievable
    value of that quantity over the space (SI units), ``budget`` the requested bound.
    """

    def __init__(self, message: str, binding: str = "", smallest: float = float("nan"), budget: float = float("nan")):
        super().__init__(message)
        self.binding = binding
        self.smallest = smallest
        self.budget = budget


def bad(field: str, value: object, why: str) -> RooflawError:
    """Build a one-line ``RooflawError`` naming ``field`` and ``value``."""
    return RooflawError(f"{field}={value!r}: {why}")


class ExternalError(RooflawError):
    """A failure outside rooflaw: a full disk, an unwritable output, a ``--measure`` function that
    raised or returned a non-number (CLI exit code 4). The message names what failed."""
