"""``perfgate calibrate``: how noisy each workload is on this machine, and what the gate can see.

A/A repeats (the same code, fresh processes) give the between-process noise the compare rule
must see through; ``perfgate.stats.power`` turns it into the smallest regression the configured
repeats can detect, the narrowest threshold identical code passes, and the repeats a target
change needs. Modules, one job each:

- ``model``: the ``Calibration`` record and its JSON document;
- ``measure``: the A/A run and the noise computations;
- ``store``: saving and looking up calibrations in the database (imported only when storing);
- ``explain``: one sentence on why a comparison was inconclusive;
- ``report``: the table the command prints.

Nothing is re-exported here, so ``--no-store`` never imports database code.
"""
