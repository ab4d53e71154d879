"""Durability: the SQLite store, its schema and migrations, and one transaction per operation."""

from .db import Readers, Store
from .tx import ReadTx, WriteTx

__all__ = ["ReadTx", "Readers", "Store", "WriteTx"]
