"""Tools: Python tools, the isolated process each call runs in, compensations that outlive
koog, and bounded regular expressions."""
