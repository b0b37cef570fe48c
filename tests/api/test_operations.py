"""The operation table against the reference OpenAPI: every operationId accounted for, paths and parameters agree."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agent_automation_mcp.api import EXCLUDED_OPERATIONS, OPERATIONS
from agent_automation_mcp.api.limits import DEFAULT_RATE_LIMITS, RateLimit, parse_rate_limits
from agent_automation_mcp.api.operations import RunEffect

TABLE = "src/agent_automation_mcp/api/operations.py"


def _spec_operations(document: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    return {
        op["operationId"]: (method.upper(), path, op)
        for path, methods in document["paths"].items()
        for method, op in methods.items()
    }


def test_every_operation_id_maps_to_exactly_one_entry_or_is_excluded(openapi_document: dict[str, Any]) -> None:
    spec = _spec_operations(openapi_document)
    table_ids = [op.operation_id for op in OPERATIONS.values()]
    assert len(table_ids) == len(set(table_ids)), "two table entries claim one operationId"
    for operation_id, (method, path, _) in spec.items():
        in_table, excluded = operation_id in table_ids, operation_id in EXCLUDED_OPERATIONS
        assert in_table or excluded, (
            f"{method} {path} ({operation_id}) is in the reference but neither in OPERATIONS "
            f"({TABLE}) nor in EXCLUDED_OPERATIONS with the reason: add its line to the table")
        assert not (in_table and excluded), f"{operation_id} is in OPERATIONS and EXCLUDED_OPERATIONS ({TABLE})"
    stray = sorted(set(table_ids) - set(spec))
    assert not stray, f"OPERATIONS ({TABLE}) names operationIds the reference does not have: {stray}"
    assert all(reason.strip() for reason in EXCLUDED_OPERATIONS.values())


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_method_path_and_parameters_agree_with_the_spec(name: str, openapi_document: dict[str, Any]) -> None:
    op = OPERATIONS[name]
    method, path, spec_op = _spec_operations(openapi_document)[op.operation_id]
    assert op.method == method
    # The logs operation lists the spec's alpha path first and the contract's path as the fallback.
    assert path in (op.path, op.fallback_path)
    declared = {p["name"]: p["in"] for p in spec_op.get("parameters", []) if p["name"] != "authorization"}
    assert {n for n, where in declared.items() if where == "query"} == set(op.query)
    # org_id is undeclared on the check-suite operations (a spec defect) but sits in their path all the same.
    assert {n for n, where in declared.items() if where == "path"} <= set(op.path_params)
    assert ("requestBody" in spec_op) == op.body


def test_an_operation_that_sets_a_run_going_answers_with_the_run(openapi_document: dict[str, Any]) -> None:
    """What a write does to a run is said on its line (`run=`): the reference cannot tell a start from a stop. But a
    task follows the run a start's or a resume's answer names, so that answer is a run or names one (`agent_run_id`)."""
    schemas = openapi_document["components"]["schemas"]
    for name, op in OPERATIONS.items():
        _, _, spec_op = _spec_operations(openapi_document)[op.operation_id]
        answer = spec_op["responses"]["200"].get("content", {}).get("application/json", {}).get("schema", {})
        shape = answer.get("$ref", "").rsplit("/", 1)[-1]
        names_run = shape == "AgentRunResponse" or "agent_run_id" in schemas.get(shape, {}).get("properties", {})
        assert names_run or not op.run.sets_going, (
            f"{name} {op.run.value} (run=RunEffect.{op.run.name} on its line in {TABLE}), yet the reference's answer "
            "names no run for a task to follow: say what it does to a run there (RunEffect.STOPS, or NOTHING)")
    assert {name for name, op in OPERATIONS.items() if op.run.sets_going} >= {"create_agent_run", "resume_agent_run"}


def test_a_read_does_nothing_to_a_run() -> None:
    with pytest.raises(ValueError, match="get_agent_run is a read, yet says it starts an agent run"):
        replace(OPERATIONS["get_agent_run"], run=RunEffect.STARTS)


def test_the_alpha_logs_path_the_service_serves_is_primary_and_the_contracts_is_the_fallback() -> None:
    logs = OPERATIONS["get_agent_run_logs"]
    assert logs.path == "/v1/alpha/organizations/{org_id}/agent/run/{agent_run_id}/logs"
    assert logs.fallback_path == "/v1/organizations/{org_id}/agent/run/{agent_run_id}/logs"


@pytest.mark.parametrize(
    ("name", "buckets"),
    [
        ("get_agent_run_logs", {"logs", "standard"}),
        ("create_agent_run", {"agent_creation", "standard"}),
        ("generate_setup_commands", {"setup_commands", "standard"}),
        ("analyze_sandbox_logs", {"log_analysis", "standard"}),
        ("edit_pull_request", {"pr_edit", "standard"}),
        ("edit_pull_request_simple", {"pr_edit", "standard"}),
        ("get_agent_run", {"standard"}),
        ("ban_checks", {"standard"}),
    ],
)
def test_buckets(name: str, buckets: set[str]) -> None:
    assert set(OPERATIONS[name].buckets) == buckets
    assert all(bucket in DEFAULT_RATE_LIMITS for bucket in OPERATIONS[name].buckets)


def test_retry_safety_and_annotations_follow_the_issue() -> None:
    """Only reads and the check-suite PUT are sent twice; every other write at most once. Which writes destroy is
    each one's line, held to what the tools that send them do by `tests/tools/test_registry.py` (the catalogue's
    `destroys`); here, the ones the issue named stay so."""
    safe = {name for name, op in OPERATIONS.items() if op.retry_safe}
    reads = {name for name, op in OPERATIONS.items() if op.method == "GET"}
    assert safe == reads | {"update_check_suite_settings"}
    destructive = {name for name, op in OPERATIONS.items() if op.destructive}
    assert destructive >= {"ban_checks", "remove_from_pull_request", "edit_pull_request", "edit_pull_request_simple",
                           "revoke_oauth_tokens", "delete_webhook"}
    assert not destructive & reads
    assert all(op.read_only == (op.method == "GET") for op in OPERATIONS.values())
    assert not OPERATIONS["create_agent_run"].idempotent and OPERATIONS["update_check_suite_settings"].idempotent


def test_rate_limit_spec_partial_override() -> None:
    limits = parse_rate_limits("standard=60/3s, logs=30/1500ms,agent_creation=2/1m")
    assert limits["standard"] == RateLimit(60, 3.0)
    assert limits["logs"] == RateLimit(30, 1.5)
    assert limits["agent_creation"] == RateLimit(2, 60.0)
    assert limits["pr_edit"] == DEFAULT_RATE_LIMITS["pr_edit"]


@pytest.mark.parametrize("spec", ["standard=60", "nosuch=1/1s", "standard=0/30s", "standard=5/0s", "logs=a/b"])
def test_rate_limit_spec_refuses_bad_items(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_rate_limits(spec)
