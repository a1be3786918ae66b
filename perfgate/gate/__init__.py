"""The pull-request gate: measure, advise and judge in one process (``perfgate gate``)."""
