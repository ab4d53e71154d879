"""Durability: the SQLite store, its schema and migrations, and one transaction per operation."""

from .db import Store
from .tx import Tx

__all__ = ["Store", "Tx"]
