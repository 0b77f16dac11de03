"""The file backend: session documents, their append log, forks, whole-session moves, the
data dir's reserve, and older data dirs (legacy/)."""
