"""The partitioned key/value Store (seed 000) and its drivers."""

from silt.kv.store import Entry, Predicate, Store, ValueWithPredicate, open_store, register_driver

__all__ = ["Entry", "Predicate", "Store", "ValueWithPredicate", "open_store", "register_driver"]
