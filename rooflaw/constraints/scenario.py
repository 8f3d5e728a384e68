"""``Scenario``: what an estimate is evaluated *in* -- device (or system), workload, precision, preset, engine and
layout -- with what every backend derives from them (the engine's applied figures, the rates, the energy
coefficients, the inverse roofs) computed once and cached on the object.

Every evaluation (:func:`~rooflaw.constraints.roofline.evaluate_columns`, the per-operator path, the decode-step
table, the layouts of :mod:`.parallel`, the posynomial branches of the GP) takes one ``Scenario`` instead of five to
ten loose arguments, so a device field is read in one place and ``rates()`` runs once per scenario, not per call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..devices.device import Device
from ..devices.system import System
from ..errors import bad
from . import assembly as A
from .engines import Applied, EngineProfile, applied, decode_linear_inv
from .precision import Precision
from .workload import Workload

if TYPE_CHECKING:  # parallel/ imports this module; the layout type is only named here
    from .parallel.layout import Layout


@dataclass(frozen=True)
class Scenario:
    """Device (or :class:`System`), workload, precision, preset, engine and layout of an evaluation, frozen.

    Fields carry their final types; :meth:`of` coerces text (``"fp16"``, ``"tp=8"``) and defaults. ``engine``:
    an engine profile name or object, None for the device's default. ``layout``: None for one chip (or any
    trivial layout); with a layout, ``device`` is the :class:`System` it runs on. ``overlap``: a layout's
    compute/communication overlap (max instead of sum). Derived values (:attr:`applied`, :attr:`rates`,
    :attr:`energy`, :meth:`inverse_roofs`) are computed on first use and cached.
    """

    device: Device | System
    workload: Workload = Workload()
    precision: Precision = Precision.parse("fp16")
    preset: str = "full"
    engine: str | EngineProfile | None = None
    layout: Layout | None = None
    overlap: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.device, (Device, System)):
            raise bad("device", self.device, "expected a Device (or a System with a layout)")
        if not isinstance(self.precision, Precision):
            raise bad("precision", self.precision, "expected a Precision (Scenario.of parses text)")
        if self.preset not in A.PRESETS:
            raise bad("preset", self.preset, f"must be one of {', '.join(A.PRESETS)}")
        if self.layout is not None and not isinstance(self.device, System):
            raise bad("layout", self.layout.describe(), "a layout runs on a System; give one as the device")

    @classmethod
    def of(
        cls,
        device: Device | System,
        workload: Workload | None = None,
        precision: str | Precision = "fp16",
        preset: str = "full",
        engine: str | EngineProfile | None = None,
        layout: str | Layout | None = None,
        overlap: bool = False,
    ) -> Scenario:
        """A scenario from loose inputs: ``workload`` None is the default :class:`Workload`, ``precision`` and
        ``layout`` may be text (``"w4a16kv8"``, ``"tp=8,pp=2"``)."""
        if isinstance(layout, str):
            from .parallel.layout import parse_layout

            layout = parse_layout(layout)
        return cls(device, workload or Workload(), Precision.parse(precision), preset, engine, layout, overlap)

    @classmethod
    def coerce(cls, device: Any, workload: Any = None, precision: Any = "fp16", preset: str = "full",
               engine: Any = None) -> Scenario:  # fmt: skip
        """``device`` itself when it is a Scenario (the other arguments must then be left at their defaults), else
        :meth:`of` the arguments: what the public functions that still take loose arguments call."""
        if isinstance(device, Scenario):
            given = {"workload": workload is not None, "precision": precision != "fp16", "preset": preset != "full",
                     "engine": engine is not None}  # fmt: skip
            extra = [k for k, v in given.items() if v]
            if extra:
                raise bad(extra[0], locals()[extra[0]], "given beside a Scenario, which already holds it")
            return device
        return cls.of(device, workload, precision, preset, engine)

    @classmethod
    def given(cls, device: Device, workload: Any, precision: Precision, preset: str, app: Applied | None) -> Scenario:
        """A one-chip scenario whose engine figures were resolved already: rates under ``app`` (None: the device's
        scalar efficiencies, as :func:`device_rates.rates` takes it)."""
        out = _rebind(cls(device, Workload(), precision, preset), workload)
        if app is not None:
            out.__dict__["applied"] = app
        out.__dict__["rates"] = A.rates(device, precision, None if out.spec.theory else app)
        return out

    # ---- what the backends derive, once ------------------------------------------------------------------------
    @property
    def chip(self) -> Device:
        """The one device whose roofs price each shard (the system's device under a layout)."""
        return self.device.device if isinstance(self.device, System) else self.device

    @cached_property
    def spec(self) -> A.Preset:
        """The preset's declaration (:func:`assembly.get_preset`)."""
        return A.get_preset(self.preset)

    @cached_property
    def applied(self) -> Applied:
        """The engine's efficiencies and overheads on this device (:func:`engines.applied`; the paper presets
        apply the device's own scalars only)."""
        return applied(self.chip, self.engine, self.preset if self.spec.engine else "paper")

    @cached_property
    def rates(self) -> A.Rates:
        """Achieved rates (:func:`device_rates.rates`); the theory presets use the device's scalar efficiencies."""
        return A.rates(self.chip, self.precision, None if self.spec.theory else self.applied)

    @cached_property
    def energy(self) -> A.EnergyCoefficients | None:
        """Per-FLOP / per-byte / idle energy (:func:`assembly.energy_coefficients`); None when the device has none."""
        return A.energy_coefficients(self.chip, self.precision)

    @property
    def host_overlap(self) -> bool:
        """Whether the host launches while the accelerator runs (a phase takes max(roofline, overhead))."""
        return bool(not self.spec.theory and self.applied.overlap)

    @cached_property
    def _roofs(self) -> dict[tuple[Any, ...], tuple[list[Any], list[Any]]]:
        return {}

    def inverse_roofs(self, roofs: tuple[str, ...], batch: Any = None) -> tuple[list[Any], list[Any]]:
        """Per part inverse roofs (s/FLOP) of prefill and decode for parts on ``roofs`` (no tile/wave model), at
        ``batch`` (default: the workload's); cached per (roofs, batch)."""
        b = self.workload.batch if batch is None else batch
        key = (roofs, float(b))
        got = self._roofs.get(key)
        if got is None:
            r = self.rates
            lin_dec = float(decode_linear_inv(r, b))
            got = ([r.inv.get(x, 0.0) for x in roofs],
                   [lin_dec if x == "linear" else r.inv.get(x, 0.0) for x in roofs])  # fmt: skip
            self._roofs[key] = got
        return list(got[0]), list(got[1])

    def scalars(self) -> dict[str, float]:
        """The workload's and precision's scalar arguments of the compiled cost model (B, S_in, S_out, bytes)."""
        return model_scalars(self.workload, self.precision)

    # ---- variants --------------------------------------------------------------------------------------------------
    def with_workload(self, workload: Any) -> Scenario:
        """This scenario at another workload, keeping the derived rates and energy (they do not depend on it)."""
        typed = isinstance(workload, Workload)
        out = dataclasses.replace(self, workload=workload) if typed else _rebind(self, workload)
        for k in ("spec", "applied", "rates", "energy"):
            if k in self.__dict__:
                out.__dict__[k] = self.__dict__[k]
        return out

    def on_chip(self) -> Scenario:
        """The one-device scenario of this one's chip (what each shard of a layout is priced in)."""
        if self.layout is None and isinstance(self.device, Device):
            return self
        out = Scenario(self.chip, self.workload, self.precision, self.preset, self.engine)
        for k in ("spec", "applied", "rates", "energy"):
            if k in self.__dict__:
                out.__dict__[k] = self.__dict__[k]
        return out

    def describe(self) -> str:
        """One line: device, precision, preset, engine (and layout)."""
        parts = [f"device {self.device.id}", f"precision {self.precision.name}", f"preset {self.preset}",
                 self.applied.describe()]  # fmt: skip
        if self.layout is not None:
            parts.append(f"layout {self.layout.describe()}")
        return "; ".join(parts)


def _rebind(sc: Scenario, workload: Any) -> Scenario:
    """``sc`` with a duck-typed workload (the decode-step table's array-valued prompt), skipping validation."""
    out = object.__new__(Scenario)
    for f in dataclasses.fields(Scenario):
        object.__setattr__(out, f.name, getattr(sc, f.name))
    object.__setattr__(out, "workload", workload)
    return out


__all__ = ["Scenario", "model_scalars"]


def model_scalars(workload: Any, precision: Any) -> dict[str, float]:
    """The compiled cost model's scalar arguments (B, S_in, S_out, unfused, bytes per element) for a workload (or
    anything with its ``batch``, ``input_tokens``, ``output_tokens`` and ``attention``) and a :class:`Precision`."""
    wl, p = workload, precision
    return {
        "B": wl.batch, "S_in": wl.input_tokens, "S_out": wl.output_tokens,
        "unfused": 1.0 if wl.attention == "unfused" else 0.0, "b_w": p.weights.bytes,
        "b_a": p.activations.bytes, "b_kv": p.kv.bytes, "b_v": p.vector_bytes, "b_h": p.head_format.bytes,
        "b_q": p.quantise_bytes, "b_d": p.dequantise_bytes,
    }  # fmt: skip
