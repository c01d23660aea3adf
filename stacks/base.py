"""What every stack shares: the AWS provider, the state backend, Terraform version, lookups.

Each concern is its own Terraform stack (own state, own plan), so a change to the workloads never
re-plans the VPC. Values that cross stacks are ordinary construct references; CDK Terrain turns
them into outputs of the producing stack and ``terraform_remote_state`` lookups in the consumer.
"""

from __future__ import annotations

import json
from typing import Any

from cdktn import LocalBackend, S3Backend, TerraformStack
from cdktn_provider_aws.data_aws_caller_identity import DataAwsCallerIdentity
from cdktn_provider_aws.data_aws_partition import DataAwsPartition
from cdktn_provider_aws.kms_alias import KmsAlias
from cdktn_provider_aws.kms_key import KmsKey
from cdktn_provider_aws.provider import AwsProvider, AwsProviderDefaultTags
from constructs import Construct

from stacks import policies
from stacks.settings import InfraSettings

#: Where a local backend's state files are, relative to the stack directory ``cdktf.out/stacks/<stack>``: the
#: directory holding ``cdktf.out`` (the project root when synthesized with ``main.py``).
LOCAL_STATE_DIR = "../../.."


class NodewrightStack(TerraformStack):
    """A stack with the AWS provider (region, default tags) and the configured state backend.

    Attributes:
        settings: the validated settings every stack reads.
    """

    def __init__(self, scope: Construct, stack_id: str, settings: InfraSettings, *, aws: bool = True) -> None:
        """Args:
            aws: configure the AWS provider; stacks that only talk to Kubernetes skip it, so their
                ``terraform init`` downloads no AWS provider.
        """
        super().__init__(scope, stack_id)
        self.settings = settings
        if aws:
            tags = {"Project": "nodewright", "Cluster": settings.cluster_name, "ManagedBy": "cdktn",
                    "Stack": stack_id, **settings.tags}
            AwsProvider(self, "aws", region=settings.region, default_tags=[AwsProviderDefaultTags(tags=tags)])
        # No terraform.required_version: checkov's terraform_json parser fails on a string under
        # "terraform" (3.3.30), and the policy gate must parse every stack. cdktf.json's
        # targetVersions ">=1.10.0" makes cdktn check backend features at synth instead.
        backend = settings.state_backend
        if backend.type == "s3":
            S3Backend(self, bucket=backend.bucket,
                      key=f"{backend.key_prefix}/{settings.cluster_name}/{stack_id}.tfstate",
                      region=backend.region or settings.region, encrypt=True, use_lockfile=True)
        else:
            # type "local": one state file per stack in the directory holding cdktf.out (where CDK Terrain's
            # default puts it), written as a path relative to the stack's directory cdktf.out/stacks/<stack>, in
            # which terraform runs: the default bakes the synthesizing machine's absolute path into the backend
            # and into every consumer's terraform_remote_state, so stacks synthesized in CI could not apply
            # anywhere else. The consumers' lookups get the same relative path (also run from a stack directory).
            LocalBackend(self, path=f"{LOCAL_STATE_DIR}/terraform.{stack_id}.tfstate")
        self._partition: DataAwsPartition | None = None
        self._caller: DataAwsCallerIdentity | None = None

    @property
    def partition(self) -> str:
        """``aws`` / ``aws-cn`` / ``aws-us-gov`` of the provider's credentials (a reference)."""
        if self._partition is None:
            self._partition = DataAwsPartition(self, "partition")
        return self._partition.partition

    @property
    def account_id(self) -> str:
        """The 12-digit account id of the provider's credentials (a reference)."""
        if self._caller is None:
            self._caller = DataAwsCallerIdentity(self, "caller")
        return self._caller.account_id

    def log_group_arn(self, name: str) -> str:
        """ARN of the log group ``name`` in this account and region, built without a reference to
        the log group itself (key policies need it before the group exists)."""
        return f"arn:{self.partition}:logs:{self.settings.region}:{self.account_id}:log-group:{name}"

    def kms_key(self, construct_id: str, purpose: str, log_group_names: tuple[str, ...] = ()) -> KmsKey:
        """A customer-managed KMS key with yearly rotation, a key policy and an alias.

        Args:
            construct_id: construct id, also the alias suffix.
            purpose: description of what the key protects.
            log_group_names: log groups CloudWatch Logs may encrypt with this key.
        """
        document = policies.kms_key_policy(self.partition, self.account_id, self.settings.region,
                                           [self.log_group_arn(name) for name in log_group_names] or None)
        key = KmsKey(self, construct_id, description=f"nodewright {self.settings.cluster_name}: {purpose}",
                     enable_key_rotation=True, rotation_period_in_days=365, deletion_window_in_days=30,
                     policy=to_json(document))
        KmsAlias(self, f"{construct_id}_alias",
                 name=f"alias/{self.settings.cluster_name}-{construct_id.replace('_', '-')}",
                 target_key_id=key.key_id)
        return key


def to_json(document: Any) -> str:
    """Serialize a policy or manifest; stable key order keeps plans free of spurious diffs."""
    return json.dumps(document, sort_keys=False, separators=(",", ":"))
