"""What a worker may see of the parent's environment: an allow-list, never the secrets.

Workers run the code under test. They used to inherit the whole environment of the CI job, so a
pull request's workload could read ``PERFGATE_DATABASE_URL`` (with its password), a GitHub
token or a cloud key, and print it into its result, the PR comment or the report (issue 16).
A worker now gets only what running training code needs: the system basics (path, locale,
temporary folder), the Python, CUDA, ROCm, NCCL, threading-library and torch settings that
change how training runs, and the names the base's configuration adds (``worker_env`` in
``[tool.perfgate]``, names or ``fnmatch`` patterns). Anything that looks like a secret is
removed even when allowed: a token, a password, a key, a credential, a database URL.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

ALLOWED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "TMPDIR",
    "TEMP",
    "TMP",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONWARNINGS",
    "PYTHONUNBUFFERED",
    "PYTHONFAULTHANDLER",
    "CUDA_*",
    "NVIDIA_*",
    "CUBLAS_*",
    "CUDNN_*",
    "HIP_*",
    "ROCM_*",
    "HSA_*",
    "ROCR_*",
    "NCCL_*",
    "GLOO_*",
    "OMP_*",
    "KMP_*",
    "MKL_*",
    "OPENBLAS_*",
    "GOMP_*",
    "TORCH_*",
    "TORCHINDUCTOR_*",
    "TORCHDYNAMO_*",
    "PYTORCH_*",
    "TRITON_*",
    "PERFGATE_PARENT_PID",
)
"""Names (``fnmatch`` patterns) every worker gets when the parent has them."""

SECRET_PATTERNS = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*_KEY",
    "*_KEY_*",
    "*DATABASE_URL*",
    "*_DSN",
    "PGPASS*",
    "ACTIONS_*",
)
"""Names that are never passed on, allowed or not (upper-cased before matching)."""


def worker_environment(environ: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The variables of ``environ`` a worker gets: :data:`ALLOWED` and ``extra`` (names or
    patterns from the base's configuration), minus anything matching :data:`SECRET_PATTERNS`."""
    allowed = (*ALLOWED, *extra)
    return {
        name: value
        for name, value in environ.items()
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed)
        and not is_secret_name(name)
    }


def is_secret_name(name: str) -> bool:
    """Whether ``name`` looks like it holds a secret (see :data:`SECRET_PATTERNS`)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)
