"""Rendering: turns result and verdict documents into tables and pages. Never prints."""
