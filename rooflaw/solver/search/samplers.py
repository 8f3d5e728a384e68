"""Optuna samplers by name: NSGA-II, TPE (multivariate), GP and random, with the settings rooflaw uses."""

from __future__ import annotations

from typing import Any

from ...errors import bad

SAMPLERS = ("nsga2", "tpe", "gp", "random")


def make_sampler(name: str, seed: int | None) -> Any:
    """The Optuna sampler ``name`` (one of :data:`SAMPLERS`), seeded. Samplers see budgets through
    ``Trial.set_constraint`` (Optuna 5's replacement of ``constraints_func``)."""
    import optuna

    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=40)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=20)
    if name == "gp":
        return optuna.samplers.GPSampler(
            seed=seed, deterministic_objective=True, n_startup_trials=20, warn_independent_sampling=False
        )
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise bad("sampler", name, f"unknown sampler; known: {', '.join(SAMPLERS)}")


__all__ = ["SAMPLERS", "make_sampler"]
