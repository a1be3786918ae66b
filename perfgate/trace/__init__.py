"""Profiler traces: one model of what a torch.profiler trace holds, and stateless extractors.

The layer under the advisor, the distributed summary and the runner's profiling mode; it
imports none of them (``tests/test_layers.py`` checks). The shape is Holistic Trace Analysis's:
read a trace once into a model, then measure it with small pure functions. HTA itself is not
used: HolisticTraceAnalysis 0.5.0 installs (with about 100 packages: pandas, plotly, Jupyter),
but reads a folder of rank traces into DataFrames, rounds the timestamps, measures overlap and
idle time by its own definitions, and its temporal breakdown fails with an IndexError on a
CPU-only trace, which is what perfgate profiles on a CI runner without a GPU.

* ``model`` — frozen records: host events, kernels, copies, steps, devices, distributed info.
* ``loader`` — a trace file (plain or gzipped JSON) → the model.
* ``categories`` — kernel families and dtypes by name, op categories, the patterns in names.
* ``timeline`` — the structure derived once: call tree, launches, steps.
* ``breakdown``, ``syncs``, ``attention``, ``compute``, ``gpu``, ``communication`` — the
  extractors: pure functions of the model or its timeline, each returning a typed result.
* ``intervals`` — sets of time intervals (union, intersection, difference).
* ``capture`` — the worker's profiling windows, run inside the worker process: the profiling
  mode of ``perfgate advise`` and a distributed repeat's communication window; with
  ``facts``, what the live training objects say beside the trace. The worker imports them only
  when it profiles, never on its timed path.
"""
