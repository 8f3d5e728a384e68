"""Continuous relaxations: the closed-form KKT optimum and geometric programs."""
