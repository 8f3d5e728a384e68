"""Optuna search over a space: the study loop (:mod:`.study`), storages, samplers, measured objectives."""
