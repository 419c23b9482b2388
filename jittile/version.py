"""jittile's release, in a module of its own: keying reads it for cache keys without importing
the package's ``__init__`` (which imports the kernel, which keys)."""

__version__ = "0.1.0"
