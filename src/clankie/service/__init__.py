"""The service: one function per dispatcher operation, the run hooks and start-up recovery."""

from .service import Executor, Recovery, Service

__all__ = ["Executor", "Recovery", "Service"]
