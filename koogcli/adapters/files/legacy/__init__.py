"""Moving what earlier versions of koog kept in files into the database, once; never on a
hot path (a command only looks for the older folders, and finds none after the move)."""
