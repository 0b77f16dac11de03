"""The message codec shared by every store: document shapes and their pydantic schema."""
