"""The installed package's version (one place, so modules can import it without cycles)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("qoslab")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
