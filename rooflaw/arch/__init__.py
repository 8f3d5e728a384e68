"""Architectures: shapes, exact parameter counts and importers."""

from .architecture import COLUMNS, Architecture, param_counts
from .load import from_file, from_hf_config, from_mapping, from_spec

__all__ = ["COLUMNS", "Architecture", "from_file", "from_hf_config", "from_mapping", "from_spec", "param_counts"]
