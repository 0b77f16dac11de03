"""koog: a terminal chat client whose memory the user can see and control."""

__version__ = "0.1.0"
