"""``perfgate compare``: load a baseline, run the statistics, produce a verdict document.

Combines stages (result documents, snapshots or the store, and ``perfgate.stats``) without
reaching into their internals; the statistics stay pure in ``perfgate.stats.compare``.
"""
