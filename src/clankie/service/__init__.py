"""The service: one function per dispatcher operation, the run hooks and start-up recovery."""

from .service import OPS, Executor, Recovery, Service

__all__ = ["OPS", "Executor", "Recovery", "Service"]
