"""The PostgreSQL storage backend (`[storage] url`): sessions, transcripts, checkpoints and
pending ingestion in one schema, shared by every machine that points at the database."""
