"""Anthropic Messages in `koog serve`: the wire format (wire.py) and the routes (route.py)."""
