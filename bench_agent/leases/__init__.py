"""Exclusive target leases: the store's interface (``base``), its two stores (``redis_store`` with a broker,
``file_store`` without), the host's check before every side effect (``guard``, reading through ``cache``),
the keeper that renews them (``keeper``), an operator's override (``override``) and the fencing
high-water marks that a Redis restart cannot reach (``fences``)."""
