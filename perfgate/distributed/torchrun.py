"""``python -m perfgate.distributed.torchrun ARGS``: torchrun that dies with perfgate.

``python -m torch.distributed.run`` would run on as an orphan, its ranks still training, if
perfgate were killed outright (a cancelled CI job). This runs torchrun's own ``main`` in-process
after asking the kernel to kill it when perfgate dies, and names itself the ranks' parent, so
each rank (``perfgate.runner.worker``) dies with it in turn (``perfgate.parent``). The
arguments, behaviour and exit status are torchrun's.
"""

from __future__ import annotations

import sys

from perfgate.parent import die_with_parent, mark_as_parent


def main(argv: list[str]) -> None:
    """Run torchrun on ``argv`` (torchrun's command line, without the program name)."""
    die_with_parent()
    mark_as_parent()  # the agent starts the ranks with a copy of os.environ
    from torch.distributed.run import main as torchrun

    torchrun(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
