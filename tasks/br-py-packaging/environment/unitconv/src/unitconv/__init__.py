"""unitconv: convert values between units of length, mass, time and temperature."""

from core import UnitError, convert
from registry import units

__version__ = "1.4.0"
__all__ = ["UnitError", "convert", "units", "__version__"]
