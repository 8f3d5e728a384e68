"""Figures in one style, PNG or SVG by extension: the roofline, the per-operator time breakdown, a frontier.

matplotlib is imported inside the drawing functions, so importing this package is cheap.
"""

from .breakdown import breakdown_data, plot_breakdown
from .frontier import plot_frontier
from .joint import plot_joint_frontier
from .report import plot_report
from .roofline import RooflineData, plot_roofline, roofline_data
from .serving import plot_serving
from .style import FORMATS, check_path

#: the public API's name for :func:`check_path`
check_figure_path = check_path

__all__ = [
    "FORMATS",
    "RooflineData",
    "breakdown_data",
    "check_figure_path",
    "check_path",
    "plot_breakdown",
    "plot_frontier",
    "plot_joint_frontier",
    "plot_report",
    "plot_roofline",
    "plot_serving",
    "roofline_data",
]
