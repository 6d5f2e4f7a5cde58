"""What comes out: the result record, the SQLite store, run folders, export and comparison."""
