"""OpenAI's chat completions in `koog serve`: the wire format (wire.py) and the route (route.py)."""
