"""The one byte-bounded store of computed values (byte_cache.py), its keys (keys.py) and every
store of the server with its budget (stores.py); models/limits.py states the budgets."""
