"""``perfgate bisect``: the commit of a range that made training slower (``search`` finds it
from interleaved A/B probes; ``session`` runs them on git worktrees)."""
