"""Baselines: refresh from history with change-point detection, show, export snapshots.

This package decides (which runs form a baseline, when it moves); ``perfgate.store.history``
persists, ``perfgate.stats.changepoints`` finds the steps.
"""
