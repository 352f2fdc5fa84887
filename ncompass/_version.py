"""The ncompass version (part of every bytecode cache key)."""

__version__ = "0.1.0"
