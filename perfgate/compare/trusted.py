"""What a pull request cannot edit: thresholds, policy and ``baselines/`` read from the base ref.

A gate whose thresholds and reference numbers come from the tree under test can be loosened by
the change it judges: raise ``step_time_s`` in ``[tool.perfgate.thresholds]``, or re-export
``baselines/`` from the slow head, and the regression passes. With a base ref, compare checks
the base out as a detached worktree (no network, the caller's checkout untouched) and reads the
configuration file and the snapshot folder from there; the database URL still comes from the
environment (a CI secret), and the database holds only what trusted jobs stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from perfgate.compare.ab import config_in_checkout
from perfgate.compare.worktrees import checked_out, repository_root
from perfgate.config import Config
from perfgate.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class TrustedInputs:
    """The configuration and snapshot folder of the base ref, and where they came from."""

    config: Config
    baseline_dir: Path | None
    ref: str
    commit: str

    @property
    def note(self) -> str:
        read = "thresholds and policy" + (" and baselines/" if self.baseline_dir else "")
        return f"{read} read from {self.ref} ({self.commit[:12]}), not from the checkout under test"


@contextlib.contextmanager
def trusted_inputs(
    config: Config, base_ref: str, baseline_dir: Path | None
) -> Iterator[TrustedInputs]:
    """The base ref's view of ``config`` and of ``baseline_dir`` (a folder of this checkout),
    valid inside the ``with`` block (the worktree is removed afterwards)."""
    repo = repository_root(config.root)
    with checked_out(repo, [base_ref]) as (base,):
        trusted = config_in_checkout(config, repo, base.path)
        # The database is the caller's (its URL a secret of this job), not the base tree's idea
        # of it, and a relative SQLite path stays relative to the checkout under test.
        trusted = replace(trusted, database_url=config.database_url, root=config.root)
        folder = None
        if baseline_dir is not None:
            absolute = baseline_dir if baseline_dir.is_absolute() else Path.cwd() / baseline_dir
            try:
                relative = absolute.resolve().relative_to(repo.resolve())
            except ValueError:
                raise UsageError(
                    f"--baseline-dir {baseline_dir} is outside the repository {repo}",
                    "keep the snapshots in the repository, or drop --base-ref",
                ) from None
            folder = base.path / relative
        yield TrustedInputs(config=trusted, baseline_dir=folder, ref=base_ref, commit=base.commit)
