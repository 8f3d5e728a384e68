"""Architectures: shapes, exact parameter counts and importers."""

from .architecture import COLUMNS, STACK_COLUMNS, Architecture, param_counts
from .load import bundled_models, from_file, from_hf_config, from_mapping, from_spec
from .space import Space, get_space, list_spaces

__all__ = [
    "bundled_models",
    "COLUMNS",
    "STACK_COLUMNS",
    "Architecture",
    "from_file",
    "from_hf_config",
    "from_mapping",
    "from_spec",
    "param_counts",
    "Space",
    "get_space",
    "list_spaces",
]
