"""I/O behind the ports of core/ports.py, by wing (HOUSE_STYLE §1):

- `atomic.py`, `paths.py`, `digests.py`, `processes.py`: shared by every wing (whole-or-
  nothing writes and locks, the data dir's paths, message digests, turn owners).
- `codec/`: the message codec and the pydantic shapes of stored documents.
- `files/`: the file backend (session documents, their log, forks, moves, the reserve,
  older data dirs under `legacy/`).
- `sql/`: every store written once over SQLite and PostgreSQL, and SQLite's long-term memory.
- `postgres/`: the PostgreSQL connection, locks, migrations and rankings.
- `model/`: the OpenAI SDK client, local servers, what servers taught koog.
- `tools/`: Python tools, the isolated process each runs in, outliving compensations,
  bounded regular expressions.
"""
