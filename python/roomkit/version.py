"""The SDK's version, which follows the API version it was written for."""
__version__ = "1.0.0"
