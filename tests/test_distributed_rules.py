"""The distributed-training rules on hand-made evidence, and the facts read from a real DDP model.

The rules (communication-exposed, dataparallel-not-ddp, rank-imbalance, non-nccl-backend-gpu)
are judged on evidence dicts: each fires on its defect, stays silent just under its threshold,
with the fix in place, and on a single-process run. The facts come from live objects: a model
wrapped in DistributedDataParallel inside a real one-process gloo group (this machine has no
GPU and one process is enough to read the group and the wrapper), and a DataParallel model on
the CPU.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from perfgate._rules_path import builtin_rules_folder
from perfgate.advise.catalogue import EVIDENCE
from perfgate.advise.expr import Value
from perfgate.advise.ranking import Advice, AdviceContext, NotFired, advise, evaluate_rule
from perfgate.advise.rules import Rule, lint, load_rules
from perfgate.trace.facts import device_backend, distributed_facts, model_wrapper
from perfgate.workloads.knobs import STANDARD_KNOBS

DISTRIBUTED = {
    "communication-exposed",
    "dataparallel-not-ddp",
    "rank-imbalance",
    "non-nccl-backend-gpu",
}
RULES = {rule.id: rule for rule in load_rules([builtin_rules_folder()])}


def outcome(rule_id: str, evidence: dict[str, Value]) -> Advice | NotFired:
    return evaluate_rule(RULES[rule_id], evidence, AdviceContext())


def fires(rule_id: str, evidence: dict[str, Value]) -> bool:
    return isinstance(outcome(rule_id, evidence), Advice)


def fired(evidence: dict[str, Value]) -> set[str]:
    """The distributed rules that fire on ``evidence``."""
    return {a.rule_id for a in advise(RULES.values(), evidence)} & DISTRIBUTED


# --- the rule files ------------------------------------------------------------------------------


def test_the_rule_files_lint_cleanly_and_are_distributed_rules() -> None:
    assert lint([builtin_rules_folder()]) == []
    assert set(RULES) >= DISTRIBUTED
    for rule_id in DISTRIBUTED:
        rule: Rule = RULES[rule_id]
        assert rule.category == "distributed"
        assert rule.evidence_names <= set(EVIDENCE), rule_id
        assert rule.references and all(url.startswith("https://") for url in rule.references)
        for knob in rule.verify_knobs:
            assert knob in STANDARD_KNOBS, (rule_id, knob)
    assert RULES["non-nccl-backend-gpu"].applies.devices == ("cuda",)
    assert RULES["dataparallel-not-ddp"].applies.devices == ("cuda",)
    assert RULES["communication-exposed"].applies.devices == ()  # gloo on CPU shows it too
    assert RULES["rank-imbalance"].applies.devices == ()


# --- communication-exposed -----------------------------------------------------------------------

EXPOSED: dict[str, Value] = {
    "device": "cpu",
    "world_size": 2.0,
    "dist_backend": "gloo",
    "model_wrapper": "DistributedDataParallel",
    "communication_share": 0.35,
    "communication_exposed_share": 0.3,
}


def test_exposed_communication_fires_with_accumulation_as_its_proof() -> None:
    advice = outcome("communication-exposed", EXPOSED)
    assert isinstance(advice, Advice)
    assert advice.saving == pytest.approx(0.15)  # 0.3 × (1 − 1/2)
    assert advice.tier == "high"
    assert advice.verify_knobs == {"grad_accumulation": 2}
    assert advice.evidence["communication_exposed_share"] == 0.3
    assert "no_sync" in advice.fix and "gradient_as_bucket_view" in advice.fix
    assert "no_sync" in advice.snippet
    # On a GPU too: the rule is not limited to a device.
    assert fires("communication-exposed", {**EXPOSED, "device": "cuda", "dist_backend": "nccl"})


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"communication_exposed_share": 0.099}, "when is false"),  # just under the threshold
        ({"communication_exposed_share": 0.02}, "when is false"),  # overlapped: the fix is on
        ({"world_size": 1.0}, "when is false"),  # one rank all-reduces with nobody
        ({"world_size": None}, "no evidence world_size"),
        ({"communication_exposed_share": None}, "no evidence communication_exposed_share"),
    ],
)
def test_exposed_communication_stays_silent(change: dict[str, Value | None], reason: str) -> None:
    evidence = {k: v for k, v in {**EXPOSED, **change}.items() if v is not None}
    assert outcome("communication-exposed", evidence) == NotFired("communication-exposed", reason)


def test_exposed_communication_verifies_on_workloads_without_the_fact() -> None:
    """The accumulation fact is not required: a DDP job without the knob still gets the advice."""
    assert "grad_accumulation_steps" not in RULES["communication-exposed"].requires
    assert fires("communication-exposed", {**EXPOSED, "grad_accumulation_steps": 4.0})
    assert fires("communication-exposed", EXPOSED)


# --- dataparallel-not-ddp ------------------------------------------------------------------------

DATAPARALLEL: dict[str, Value] = {
    "device": "cuda",
    "model_wrapper": "DataParallel",
    "gpu_count": 4.0,
    "gpu_idle_share": 0.4,
}


def test_dataparallel_on_several_gpus_is_told_to_use_ddp() -> None:
    advice = outcome("dataparallel-not-ddp", DATAPARALLEL)
    assert isinstance(advice, Advice)
    assert advice.saving == pytest.approx(0.2)  # the GPUs' idle share, halved
    assert advice.verify_knobs == {}  # no knob changes the launcher
    assert "torchrun" in advice.fix and "DistributedDataParallel" in advice.fix


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"gpu_count": 1.0}, "when is false"),  # DataParallel on one GPU calls the module
        ({"model_wrapper": "DistributedDataParallel"}, "when is false"),  # the fix is on
        ({"model_wrapper": "none"}, "when is false"),
        ({"device": "cpu"}, "applies to cuda, not cpu"),
        ({"model_wrapper": None}, "no evidence model_wrapper"),
    ],
)
def test_dataparallel_rule_stays_silent(change: dict[str, Value | None], reason: str) -> None:
    evidence = {k: v for k, v in {**DATAPARALLEL, **change}.items() if v is not None}
    assert outcome("dataparallel-not-ddp", evidence) == NotFired("dataparallel-not-ddp", reason)


# --- rank-imbalance -----------------------------------------------------------------------------

IMBALANCED: dict[str, Value] = {
    "device": "cpu",
    "world_size": 2.0,
    "dist_backend": "gloo",
    "model_wrapper": "DistributedDataParallel",
    "rank_imbalance": 0.5,  # e.g. one rank with twice the work of the other
}


def test_uneven_ranks_are_found_and_proved_with_even_batches() -> None:
    advice = outcome("rank-imbalance", IMBALANCED)
    assert isinstance(advice, Advice)
    # Two ranks, one doing twice the work: evening it out saves a quarter of the step.
    assert advice.saving == pytest.approx(0.25)
    assert advice.verify_knobs == {"uneven_batches": False}
    assert "DistributedSampler" in advice.fix and "rank-0" in advice.fix


def test_a_gpu_imbalance_counts_from_ten_percent() -> None:
    advice = outcome("rank-imbalance", {**IMBALANCED, "device": "cuda", "rank_imbalance": 0.12})
    assert isinstance(advice, Advice)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"rank_imbalance": 0.299}, "when is false"),  # a CPU needs 30 %: ranks share cores
        ({"rank_imbalance": 0.099, "device": "cuda"}, "when is false"),
        ({"rank_imbalance": 0.0}, "when is false"),  # even shards: the fix is on
        ({"world_size": 1.0}, "when is false"),
        ({"rank_imbalance": None}, "no evidence rank_imbalance"),
    ],
)
def test_rank_imbalance_stays_silent(change: dict[str, Value | None], reason: str) -> None:
    evidence = {k: v for k, v in {**IMBALANCED, **change}.items() if v is not None}
    assert outcome("rank-imbalance", evidence) == NotFired("rank-imbalance", reason)


# --- non-nccl-backend-gpu ------------------------------------------------------------------------

GLOO_ON_GPU: dict[str, Value] = {
    "device": "cuda",
    "world_size": 8.0,
    "dist_backend": "gloo",
    "model_wrapper": "DistributedDataParallel",
    "communication_share": 0.2,
}


def test_gloo_on_gpus_is_told_to_use_nccl() -> None:
    advice = outcome("non-nccl-backend-gpu", GLOO_ON_GPU)
    assert isinstance(advice, Advice)
    assert advice.saving == pytest.approx(0.15)  # 0.2 × (1 − 1/4)
    assert advice.verify_knobs == {"backend": "nccl"}
    assert fires("non-nccl-backend-gpu", {**GLOO_ON_GPU, "dist_backend": "mpi"})


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"dist_backend": "nccl"}, "when is false"),  # the fix is on (RCCL reports nccl too)
        ({"world_size": 1.0}, "when is false"),
        ({"device": "cpu"}, "applies to cuda, not cpu"),  # gloo is the CPU backend
        ({"dist_backend": None}, "no evidence dist_backend"),
    ],
)
def test_non_nccl_rule_stays_silent(change: dict[str, Value | None], reason: str) -> None:
    evidence = {k: v for k, v in {**GLOO_ON_GPU, **change}.items() if v is not None}
    assert outcome("non-nccl-backend-gpu", evidence) == NotFired("non-nccl-backend-gpu", reason)


# --- single-process runs -------------------------------------------------------------------------


def test_no_distributed_rule_fires_on_a_single_process_cpu_run() -> None:
    """A CPU run of one process: no group, no wrapper, so none of the distributed facts; the
    rules stay silent even with a large communication share (which one process never has)."""
    evidence: dict[str, Value] = {
        "device": "cpu",
        "workload_kind": "transformer",
        "profiled_steps": 3.0,
        "step_time_ms": 40.0,
        "matmul_share": 0.5,
        "elementwise_share": 0.2,
        "optimizer_share": 0.1,
        "communication_share": 0.3,
        "communication_exposed_share": 0.3,
        "batch_size": 8.0,
        "compiled": False,
        **distributed_facts(torch.nn.Linear(4, 4), {"precision": "off"}, "cpu"),
    }
    assert not {"world_size", "model_wrapper", "rank_imbalance"} & set(evidence)
    assert fired(evidence) == set()
    # The same on a GPU, where gpu_count is known but there is still no group.
    assert fired({**evidence, "device": "cuda", "gpu_count": 8.0, "gpu_idle_share": 0.5}) == set()


def test_every_rule_fires_on_its_own_defect_only() -> None:
    assert fired(EXPOSED) == {"communication-exposed"}
    assert fired(DATAPARALLEL) == {"dataparallel-not-ddp"}
    assert fired(IMBALANCED) == {"rank-imbalance"}
    assert fired(GLOO_ON_GPU) == {"non-nccl-backend-gpu"}


# --- facts from live objects ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def gloo_group() -> Iterator[None]:
    """A real one-process gloo group on a free local port, destroyed afterwards."""
    if not dist.is_available():
        pytest.skip("this torch build has no torch.distributed")
    dist.init_process_group(
        backend="gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", world_size=1, rank=0
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def compile_module(module: torch.nn.Module) -> torch.nn.Module:
    """``torch.compile(module)``: an OptimizedModule holding the original as ``_orig_mod``
    (nothing is compiled until it is called, and it is never called here)."""
    compiled = torch.compile(module)
    assert isinstance(compiled, torch.nn.Module) and compiled._orig_mod is module
    return compiled


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


@pytest.mark.usefixtures("gloo_group")
@pytest.mark.slow
def test_ddp_facts_from_a_real_gloo_group() -> None:
    ddp = torch.nn.parallel.DistributedDataParallel(_model())
    facts = distributed_facts(ddp, {"grad_accumulation": 4, "precision": "off"}, "cpu")
    assert facts == {
        "world_size": 1.0,
        "dist_backend": "gloo",
        "model_wrapper": "DistributedDataParallel",
        "ddp_bucket_cap_mb": 25.0,
        "ddp_gradient_as_bucket_view": False,
        "grad_accumulation_steps": 4.0,
    }
    tuned = torch.nn.parallel.DistributedDataParallel(
        _model(), bucket_cap_mb=50, gradient_as_bucket_view=True
    )
    facts = distributed_facts(tuned, {}, "cpu")
    assert facts["ddp_bucket_cap_mb"] == 50.0
    assert facts["ddp_gradient_as_bucket_view"] is True
    assert "grad_accumulation_steps" not in facts  # no such knob: absent, not 1
    assert "gpu_count" not in facts  # a CPU run
    # torch.compile wraps the DDP module: the wrapper is found through _orig_mod.
    compiled = compile_module(ddp)
    assert distributed_facts(compiled, {}, "cpu")["model_wrapper"] == "DistributedDataParallel"
    # In a group, an unwrapped model says so.
    assert distributed_facts(_model(), {}, "cpu")["model_wrapper"] == "none"


@pytest.mark.usefixtures("gloo_group")
def test_ddp_facts_become_evidence_the_rules_read() -> None:
    ddp = torch.nn.parallel.DistributedDataParallel(_model())
    facts = distributed_facts(ddp, {"grad_accumulation": 1}, "cpu")
    for name, value in facts.items():
        spec = EVIDENCE[name]
        assert spec.source == "facts", name
        assert "cpu" in spec.devices, name
        kind = {bool: "bool", float: "number", str: "text"}[type(value)]
        assert spec.kind == kind, name
    evidence: dict[str, Value] = {"device": "cpu", **facts, "communication_exposed_share": 0.4}
    assert fired(evidence) == set()  # one rank: nothing is exposed to anybody
    assert fired({**evidence, "world_size": 2.0}) == {"communication-exposed"}


def test_dataparallel_on_the_cpu_reads_as_dataparallel_without_a_world() -> None:
    wrapped = torch.nn.DataParallel(_model())  # no GPU here: it wraps the module, no devices
    assert not dist.is_initialized()
    assert distributed_facts(wrapped, {}, "cpu") == {"model_wrapper": "DataParallel"}
    assert model_wrapper(wrapped) == ("DataParallel", wrapped)


def test_a_plain_single_process_model_has_no_distributed_facts() -> None:
    assert not dist.is_initialized()
    assert distributed_facts(_model(), {}, "cpu") == {}
    assert distributed_facts(_model(), {"grad_accumulation": 2}, "cpu") == {
        "grad_accumulation_steps": 2.0
    }
    assert model_wrapper(compile_module(_model()))[0] == "none"


def test_a_per_device_backend_names_the_one_for_the_run() -> None:
    assert device_backend("gloo", "cpu") == "gloo"
    assert device_backend("nccl", "cuda") == "nccl"
    assert device_backend("cpu:gloo,cuda:nccl", "cuda") == "nccl"
    assert device_backend("cpu:gloo,cuda:nccl", "cpu") == "gloo"
    assert device_backend("cpu:gloo", "cuda") == "cpu:gloo"  # none for the device: as given
