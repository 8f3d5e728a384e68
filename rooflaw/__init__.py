"""rooflaw: which LLM architecture gives the lowest loss that meets a latency/memory/energy budget on a device.

Loss laws (``rooflaw.objectives``) + a roofline cost model (``rooflaw.constraints``) over a device
catalog (``rooflaw.devices``), solved in closed form and by search (``rooflaw.solver``).
"""

from .api import *  # noqa: F403
from .api import __all__  # noqa: F401

__version__ = "0.1.0"
