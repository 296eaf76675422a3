"""The package's version: read by setuptools for the distribution and sent in X-Keystone-Client."""

__version__ = "0.1.0"
