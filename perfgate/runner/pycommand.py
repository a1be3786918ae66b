"""How perfgate starts its own modules in a new interpreter: never from the working directory.

``python -m perfgate.runner.worker`` puts the working directory first on ``sys.path``. In the
gate that directory is the checkout under test, so a pull request that adds ``torch.py`` or a
``perfgate/`` folder at its top would replace the modules the worker, the fork server (which
also forks the *base* side's workers) and torchrun's agent import before any of perfgate's own
code runs. :func:`module_command` starts a module with that entry removed: ``python -P`` where
the interpreter has it (3.11+), else a ``-c`` line that drops ``sys.path[0]`` before importing
anything and runs the module as ``-m`` would. The workload's own folders still reach
``sys.path`` the intended way: the worker adds its spec's ``python_path``.
"""

from __future__ import annotations

import sys

_RUN_MODULE = (
    "import sys; del sys.path[0]; import runpy; "
    "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
)


def module_command(module: str, *args: str) -> list[str]:
    """The command line running ``module`` as ``__main__`` with ``args``, without the working
    directory on its path."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    return [sys.executable, "-c", _RUN_MODULE.format(module=module), *args]
