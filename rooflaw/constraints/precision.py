"""Precision formats live in :mod:`rooflaw.devices.precision` (the cost model and the loss laws both read them);
this name is kept for code written against ``rooflaw.constraints.precision``."""

from ..devices.precision import FORMATS, Format, Precision, wider

__all__ = ["FORMATS", "Format", "Precision", "wider"]
