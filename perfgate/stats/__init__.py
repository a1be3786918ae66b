"""Pure statistics for benchmark histories: numbers in, numbers and frozen dataclasses out.

Nothing here does I/O or imports other perfgate packages (except ``perfgate.errors``), so every
number a gate decision rests on can be tested and reasoned about in isolation. Modules are imported
by their full name (``perfgate.stats.changepoints``); this package imports none of them, so that
importing one lightweight module never pays for another's dependencies.
"""
