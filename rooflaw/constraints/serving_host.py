"""Host and front-end seconds a datacenter serving stack adds outside its kernels, and their fit.

Five figures per engine (SI units), none of which a kernel timing shows:

* ``step_s``: seconds per executor step (one forward pass of the in-flight batch): the scheduler, sampling,
  host↔device syncs, the batch's bookkeeping;
* ``layer_s``: seconds per transformer layer per step (per-layer host syncs and launch gaps CUDA graphs do not
  hide, e.g. around the tensor-parallel all-reduces); a pipeline stage runs ``layers / pp`` of them;
* ``seq_s``: seconds per sequence in the step (the executor's per-request work each step: scheduling, KV-cache
  block bookkeeping, sampling and the output of one request; a PyTorch-flow executor does it in Python), with
  attention DP each rank's share;
* ``request_s``: seconds per request in the serving front end (HTTP, tokenising the prompt, admission,
  detokenising and streaming the first token): added to the TTFT and latency of a request that goes through a
  server (not to ``trtllm-bench`` offline runs, whose requests are queued inside the engine already tokenised);
* ``prompt_token_s``: the front end's seconds per prompt token (tokenising it, the request body), added with
  ``request_s``.

The figures are fitted ONCE on published datacenter rows (``benchmarks/fit_datacenter_host.py``), each row's
prediction being linear in them (a step's seconds add ``step_s + layer_s·layers`` to every step of the schedule,
and ``seq_s`` per sequence in it, so every TTFT, TPOT and seconds per output token is
``y0 + k·(step_s + layer_s·L) + kq·seq_s + kr·(request_s + prompt_token_s·P)``): a robust
least squares on log(predicted / measured), with leave-one-source-out as the held-out figure. The shipped figures
live in ``serving_host.toml`` beside this module; an engine without an entry adds nothing.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import bad

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HOST_FILE = Path(__file__).with_name("serving_host.toml")
#: The fitted figures, in the order of :class:`ServingHost`'s fields.
HOST_KEYS = ("step_s", "layer_s", "seq_s", "request_s", "prompt_token_s")
#: Scale of a log error past which the fit's loss grows linearly (``soft_l1``: robust to a few far rows).
LOSS_SCALE = 0.1


@dataclass(frozen=True)
class ServingHost:
    """Host-side seconds outside the kernels (see the module docstring): per step, per layer per step, per
    sequence per step, per request and per prompt token through the front end."""

    step_s: float = 0.0
    layer_s: float = 0.0
    seq_s: float = 0.0
    request_s: float = 0.0
    prompt_token_s: float = 0.0

    def __post_init__(self) -> None:
        for key in HOST_KEYS:
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise bad(key, v, "must be a finite number of seconds >= 0")

    def front_end(self, prompt_tokens: int) -> float:
        """Seconds a request of ``prompt_tokens`` spends in a server's front end."""
        return self.request_s + self.prompt_token_s * prompt_tokens

    def per_step(self, layers: float, sequences: float = 0.0) -> float:
        """Seconds one executor step of a stage running ``layers`` transformer layers over ``sequences`` adds."""
        return self.step_s + self.layer_s * layers + self.seq_s * sequences


def static_batch(out: dict[str, Any], host: ServingHost, layers: float, output_tokens: int,
                 batch: int) -> dict[str, Any]:  # fmt: skip
    """A static batch's metrics (``evaluate_layout``'s ``ttft_s``, ``latency_s``) with ``host``'s per-step seconds
    (``batch`` sequences) added to each of its ``output_tokens`` passes (the prefill, then every decode step); no
    front end."""
    h = host.per_step(layers, batch)
    return {**out, "ttft_s": out["ttft_s"] + h, "latency_s": out["latency_s"] + output_tokens * h}


@cache
def _shipped() -> dict[str, dict[str, Any]]:
    if not HOST_FILE.is_file():
        return {}
    data = tomllib.loads(HOST_FILE.read_text(encoding="utf-8"))
    return {k: v for k, v in data.get("engine", {}).items() if isinstance(v, dict)}


def serving_host(engine: str) -> ServingHost:
    """The shipped host figures of ``engine`` (``serving_host.toml``); zeros for an engine without an entry."""
    fit = _shipped().get(str(engine))
    return ServingHost(**{k: float(fit[k]) for k in HOST_KEYS if k in fit}) if fit else ServingHost()


@dataclass(frozen=True)
class HostRows:
    """Each row's prediction as a line in the figures (time units: seconds; throughput rows as seconds per output
    token): ``y0`` with no host time, ``k_step`` its seconds per second of host time per step, ``layers`` (per
    stage), ``k_seq`` its seconds per second of host time per sequence per step, ``k_request`` its seconds per
    second of front-end time per request (``prompt_tokens`` its prompt's tokens), ``measured`` in the same unit,
    ``throughput`` whether the row's metric is a rate (its value is 1 / the time), ``group`` the row's source
    (left out together)."""

    y0: np.ndarray
    k_step: np.ndarray
    layers: np.ndarray
    k_seq: np.ndarray
    k_request: np.ndarray
    prompt_tokens: np.ndarray
    measured: np.ndarray
    throughput: np.ndarray
    group: tuple[str, ...]

    def design(self, mask: np.ndarray | None = None) -> np.ndarray:
        """(rows, :data:`HOST_KEYS`): each row's seconds per second of each figure (the line's slopes)."""
        m = slice(None) if mask is None else mask
        k = self.k_request[m]
        return np.stack([self.k_step[m], self.k_step[m] * self.layers[m], self.k_seq[m], k, k * self.prompt_tokens[m]],
                        axis=1)  # fmt: skip

    def predict(self, host: ServingHost, mask: np.ndarray | None = None) -> np.ndarray:
        m = slice(None) if mask is None else mask
        return self.y0[m] + self.design(mask) @ np.array([getattr(host, k) for k in HOST_KEYS])


def fit_host(rows: HostRows, mask: np.ndarray | None = None) -> ServingHost:
    """The figures (each >= 0, to 4 significant digits and the nanosecond) minimising
    Σ soft_l1(log(predicted / measured)) over the rows in ``mask`` (all when None); a figure no row's prediction
    depends on stays 0."""
    from scipy.optimize import least_squares

    m = np.ones(len(rows.y0), bool) if mask is None else np.asarray(mask, bool)
    cols = rows.design(m)
    used = np.abs(cols).max(axis=0) > 0
    scale = 1e-3  # solve in milliseconds

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log((rows.y0[m] + cols[:, used] @ (x * scale)) / rows.measured[m])

    x = least_squares(resid, np.full(int(used.sum()), 0.1), bounds=(0.0, np.inf), loss="soft_l1",
                      f_scale=LOSS_SCALE, x_scale=1.0, xtol=1e-12, ftol=1e-12, gtol=1e-12).x  # fmt: skip
    full = np.zeros(len(HOST_KEYS))
    full[used] = x * scale
    return ServingHost(*(float(f"{round(v, 9):.4g}") for v in full))  # to 4 digits and the nanosecond


def ratios(rows: HostRows, pred: np.ndarray) -> np.ndarray:
    """Predicted / measured in each row's own metric (a throughput row's: measured / predicted seconds per token)."""
    r = pred / rows.measured
    return np.where(rows.throughput, 1.0 / r, r)


def leave_one_source_out(rows: HostRows) -> tuple[np.ndarray, dict[str, ServingHost]]:
    """Each row's prediction from figures fitted on every OTHER source's rows, and those figures per source."""
    groups = np.array(rows.group)
    pred = np.empty(len(rows.y0))
    fits: dict[str, ServingHost] = {}
    for g in dict.fromkeys(rows.group):
        out = groups == g
        fits[g] = fit_host(rows, ~out)
        pred[out] = rows.predict(fits[g], out)
    return pred, fits


def host_toml(fits: dict[str, ServingHost], sources: dict[str, Sequence[str]]) -> str:
    """``serving_host.toml``'s text: each engine's figures and the sources they were fitted on."""
    lines = ["# Host and front-end figures of datacenter serving (rooflaw/constraints/serving_host.py). Written by:",
             "# python benchmarks/fit_datacenter_host.py --write", ""]  # fmt: skip
    for name, h in fits.items():
        lines.append(f'[engine."{name}"]')
        lines += [f"{k} = {getattr(h, k):.4g}" for k in HOST_KEYS]
        lines.append("sources = [" + ", ".join(f'"{s}"' for s in sources[name]) + "]")
        lines.append("")
    return "\n".join(lines)


__all__ = [
    "HOST_KEYS",
    "HostRows",
    "ServingHost",
    "fit_host",
    "host_toml",
    "leave_one_source_out",
    "ratios",
    "serving_host",
    "static_batch",
]
