"""Advising: evidence from a short profiling window, rules that read it, verified fixes."""
