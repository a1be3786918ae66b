"""What a pull request cannot edit: everything that decides is read from the base ref.

A gate whose thresholds, reference numbers, suite or database come from the tree under test can
be loosened by the change it judges: raise ``step_time_s`` in ``[tool.perfgate.thresholds]``,
re-export ``baselines/`` from the slow head, drop the slow workload from the suite, commit a
database of flattering baselines, or cut ``ab_rounds`` until nothing can be decided. With a
base ref, perfgate checks the base out as a detached worktree (no network, the caller's checkout
untouched) and takes from there:

- the configuration: suite membership, workload definitions (factory, presets, knobs), thresholds,
  policy, rounds and budgets, rules;
- the snapshot folder (``baselines/``);
- the database: ``PERFGATE_DATABASE_URL`` from the job's environment (a CI secret), else the base
  configuration's URL, a relative SQLite path taken inside the base checkout — never the URL or a
  database file of the checkout under test.

The head is then measured with the base's workload definitions over the head's code
(:func:`head_view`): only its measured performance can reach the verdict.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from perfgate.compare.ab import config_in_checkout
from perfgate.compare.worktrees import Checkout, checked_out, repository_root
from perfgate.config import Config, absolute_sqlite_url
from perfgate.errors import UsageError

DATABASE_ENV = "PERFGATE_DATABASE_URL"


@dataclass(frozen=True, kw_only=True)
class TrustedInputs:
    """The base ref's configuration and snapshot folder, and where they came from."""

    config: Config
    """The base ref's configuration; its ``database_url`` is the trusted database, absolute."""
    baseline_dir: Path | None
    checkout: Checkout
    """The base worktree (valid inside the ``with`` block of :func:`trusted_inputs`)."""
    repo: Path
    """The repository under test: the caller's checkout."""

    @property
    def ref(self) -> str:
        return self.checkout.ref

    @property
    def commit(self) -> str:
        return self.checkout.commit

    @property
    def note(self) -> str:
        read = "suite, thresholds and policy" + (" and baselines/" if self.baseline_dir else "")
        return f"{read} read from {self.ref} ({self.commit[:12]}), not from the checkout under test"


def trusted_database_url(
    caller_root: Path, base: Config, environ: Mapping[str, str] | None = None
) -> str:
    """The database whose baselines judge the pull request, as an absolute URL.

    The job's ``PERFGATE_DATABASE_URL`` wins (relative to the caller's project, where the job
    set it up); without it, the base configuration's URL with a relative SQLite path taken in
    the base checkout (a file only the base branch can have committed). The checkout under test
    is never asked: a fork's pull request, which gets no secrets, must not bring its own.
    """
    environ = os.environ if environ is None else environ
    if environ.get(DATABASE_ENV):
        return absolute_sqlite_url(environ[DATABASE_ENV], caller_root)
    return absolute_sqlite_url(base.database_url, base.root)


@contextlib.contextmanager
def trusted_inputs(
    config: Config, base_ref: str, baseline_dir: Path | None
) -> Iterator[TrustedInputs]:
    """The base ref's view of ``config`` and of ``baseline_dir`` (a folder of this checkout),
    valid inside the ``with`` block (the worktree is removed afterwards)."""
    repo = repository_root(config.root)
    with checked_out(repo, [base_ref]) as (base,):
        base_config = config_in_checkout(config, repo, base.path)
        yield trusted_from(repo, base, base_config, config.root, baseline_dir)


def trusted_from(
    repo: Path,
    base: Checkout,
    base_config: Config,
    caller_root: Path,
    baseline_dir: Path | None,
) -> TrustedInputs:
    """The trusted inputs of a base checkout already made: ``base_config`` is its
    configuration, ``caller_root`` the project folder of the checkout under test (where a
    relative ``PERFGATE_DATABASE_URL`` points), ``baseline_dir`` a folder of that checkout
    whose counterpart in the base is read."""
    trusted = replace(base_config, database_url=trusted_database_url(caller_root, base_config))
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
    return TrustedInputs(config=trusted, baseline_dir=folder, checkout=base, repo=repo)


def head_view(trusted: TrustedInputs) -> Config:
    """The base's configuration over the head's code: the same file position in the checkout
    under test, so user workload modules and source files are the head's, while everything
    the file says (suite, definitions, presets, knobs, settings, thresholds) is the base's."""
    base = trusted.checkout.path.resolve()
    relative = trusted.config.root.resolve().relative_to(base)
    source = trusted.config.source
    return replace(
        trusted.config,
        root=trusted.repo / relative,
        source=None if source is None else trusted.repo / source.resolve().relative_to(base),
    )
