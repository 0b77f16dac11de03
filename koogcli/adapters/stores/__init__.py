"""Other tools' own stores, one reader per source (SPEC §4a): each streams a file or a
database into koog's conversation values (core/archive.py) and knows nothing of koog's
storage; services/archive.py decides what is new and stores it."""
