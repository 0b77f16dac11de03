"""The Responses API in `koog serve`: request parsing (request.py), the answers' shapes
(wire.py) and the routes (route.py)."""
