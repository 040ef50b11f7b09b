"""The partitioned key/value Store and its drivers (docs/design/kv.md)."""

from silt.kv.store import Entry, Predicate, Store, ValueWithPredicate, open_store, register_driver

__all__ = ["Entry", "Predicate", "Store", "ValueWithPredicate", "open_store", "register_driver"]
