"""Optuna search over a space: studies, storages, samplers, measured objectives."""
