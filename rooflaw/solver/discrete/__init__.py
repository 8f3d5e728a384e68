"""Discrete answers: rounding a relaxed optimum, exhaustive enumeration, Pareto frontiers."""
