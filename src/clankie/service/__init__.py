"""The service: one function per dispatcher operation, the run executor, start-up recovery."""

from .base import Executor
from .runs import Recovery
from .service import Service

__all__ = ["Executor", "Recovery", "Service"]
