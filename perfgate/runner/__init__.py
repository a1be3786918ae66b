"""The runner: worker processes, timing, FLOP counting and orchestration."""
