"""Every document format perfgate writes, for the tests that read each one back and check its
shipped schema against its model (``tests/test_documents.py``)."""

from __future__ import annotations

from typing import Any

from perfgate.documents.advice import ADVICE
from perfgate.documents.base import DocumentKind
from perfgate.documents.bisect import BISECT
from perfgate.documents.calibration import CALIBRATION
from perfgate.documents.ceilings import CEILINGS, CEILINGS_STORE
from perfgate.documents.diagnosis import DIAGNOSIS
from perfgate.documents.refresh import REFRESH
from perfgate.documents.result import RESULT
from perfgate.documents.snapshot import SNAPSHOT
from perfgate.documents.verdict import ERROR, VERDICT
from perfgate.documents.worker import WORKER_REPORT, WORKER_SPEC

KINDS: tuple[DocumentKind[Any], ...] = (
    RESULT,
    VERDICT,
    ERROR,
    CALIBRATION,
    CEILINGS,
    CEILINGS_STORE,
    SNAPSHOT,
    ADVICE,
    DIAGNOSIS,
    WORKER_SPEC,
    WORKER_REPORT,
    BISECT,
    REFRESH,
)
