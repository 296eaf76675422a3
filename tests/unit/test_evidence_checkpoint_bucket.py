"""The checkpoint bucket: the template's resource and policies, and the setting naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from context_ledger.local.cfn import load_yaml
from context_ledger.settings import SettingsError, load_settings

TEMPLATE = load_yaml(Path(__file__).resolve().parents[2] / "template.yaml")
RESOURCES = TEMPLATE["Resources"]
BUCKET = "EvidenceCheckpointBucket"


def _statements(function: str) -> list[dict[str, Any]]:
    statements = []
    for policy in RESOURCES[function]["Properties"]["Policies"]:
        if isinstance(policy, dict):
            statements += policy.get("Statement", [])
    return statements


def test_the_bucket_is_versioned_private_and_outlives_the_stack() -> None:
    bucket = RESOURCES[BUCKET]

    assert bucket["Type"] == "AWS::S3::Bucket"
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert all(bucket["Properties"]["PublicAccessBlockConfiguration"].values())


def test_nobody_may_delete_a_checkpoint() -> None:
    policy = next(
        r["Properties"]
        for r in RESOURCES.values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": BUCKET}
    )

    deny = next(
        s for s in policy["PolicyDocument"]["Statement"] if "s3:DeleteObject" in s["Action"]
    )
    assert (deny["Effect"], deny["Principal"]) == ("Deny", "*")
    assert "s3:DeleteObjectVersion" in deny["Action"]


def test_every_function_is_told_the_bucket() -> None:
    variables = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]

    assert variables["KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET"] == {"Ref": BUCKET}


@pytest.mark.parametrize(
    "function", ["AttributionWriterFunction", "ChainVerifyFunction", "ObservabilityFunction"]
)
def test_chain_writers_and_verifiers_may_list_read_and_put_but_not_delete(function: str) -> None:
    granted = {
        action
        for statement in _statements(function)
        if statement["Effect"] == "Allow" and "EvidenceCheckpointBucket" in str(statement)
        for action in (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
    }

    assert granted == {"s3:ListBucket", "s3:GetObject", "s3:PutObject"}


def test_aws_mode_needs_a_checkpoint_bucket() -> None:
    with pytest.raises(SettingsError, match="KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET"):
        load_settings(
            KEYSTONE_ENVIRONMENT="aws",
            DATABASE_URL="postgresql://db/x",
            KEYSTONE_AUTH_JWKS_URL="https://idp.test/jwks.json",
            KEYSTONE_AUTH_ISSUER="https://idp.test/",
        )
