"""Persistence of runs (SQLModel over SQLite or PostgreSQL). Stores; never decides."""
