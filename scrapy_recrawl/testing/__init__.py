"""The test kit for plug-in and backend authors (docs/plugins.md)."""

from .store_contract import StoreContract

__all__ = ["StoreContract"]
