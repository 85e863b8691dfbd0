"""Where a cycle's shared state lives when many crawler processes run it (Redis)."""
