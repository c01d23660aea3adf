"""The catalogue of nodewright's checks: id, one-line name (shown by checkov) and the fix the gate prints.

Also the finding/result types every rule module returns. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CheckInfo:
    """A check's ``id`` (``CKV_NW_<n>``), checkov ``name``, ``fix`` text, and where it runs
    (``frameworks``: checkov framework names)."""

    id: str
    name: str
    fix: str
    frameworks: tuple[str, ...]


TF = ("terraform_json",)
K8S = ("kubernetes", "terraform_json")  # manifests, and kubernetes_manifest resources in the stacks

CHECKS: dict[str, CheckInfo] = {
    c.id: c
    for c in (
        CheckInfo(
            "CKV_NW_1",
            "The node autoscaler's IAM role may iam:PassRole the node role",
            "Add a statement allowing iam:PassRole on the node role's ARN, with StringEquals "
            "iam:PassedToService = ec2.amazonaws.com, to the controller role's policy.",
            TF,
        ),
        CheckInfo(
            "CKV_NW_2",
            "iam:PassRole is scoped to a role ARN and conditioned on iam:PassedToService = ec2.amazonaws.com",
            "Give iam:PassRole the node role's ARN as Resource (never *) and the condition "
            "StringEquals iam:PassedToService = [ec2.amazonaws.com].",
            TF,
        ),
        CheckInfo(
            "CKV_NW_3",
            "IRSA trust: sts:AssumeRoleWithWebIdentity with StringEquals on :sub (one service account) and :aud "
            "(Pod Identity: pods.eks.amazonaws.com, one association)",
            "Trust the cluster's OIDC provider (Federated) for sts:AssumeRoleWithWebIdentity only, with "
            "StringEquals <issuer>:sub = system:serviceaccount:<namespace>:<name> (exactly one, no wildcard) "
            "and StringEquals <issuer>:aud = sts.amazonaws.com. With EKS Pod Identity: trust only Service "
            "pods.eks.amazonaws.com for sts:AssumeRole/sts:TagSession and associate exactly one service account.",
            TF,
        ),
        CheckInfo(
            "CKV_NW_4",
            "No wildcard IAM actions (*, ec2:*, iam:*, <service>:*, NotAction) nor KMS key policies open to "
            "Principal *; every policy is readable, Version 2012-10-17 and within IAM's size limit",
            "List the exact actions the controller calls (see docs/policy-gate.md); write policies as JSON "
            "or aws_iam_policy_document so the gate can read them, with Version 2012-10-17; split a policy over "
            "6,144 characters (managed) / 10,240 (inline) / 2,048 (trust) into several managed policies; give a "
            "key policy's Principal '*' statement a kms:CallerAccount (or aws:PrincipalOrgID) condition, or name "
            "the principals.",
            TF,
        ),
        CheckInfo(
            "CKV_NW_5",
            "EC2 launch/terminate/tag and instance-profile actions are conditioned on the cluster ownership tag",
            "Condition ec2:RunInstances/ec2:CreateFleet on aws:RequestTag/kubernetes.io/cluster/<cluster> = owned "
            "(only image, snapshot, subnet and security-group ARNs may go without), ec2:TerminateInstances/"
            "ec2:RebootInstances/ec2:DeleteLaunchTemplate on aws:ResourceTag/kubernetes.io/cluster/<cluster> = owned; give "
            "iam:CreateInstanceProfile only instance-profile ARNs with that aws:RequestTag, and iam:AddRole/"
            "RemoveRole/Delete/TagInstanceProfile only with that aws:ResourceTag; ec2:CreateTags only with "
            "ec2:CreateAction (tag on create) or that aws:ResourceTag.",
            TF,
        ),
        CheckInfo(
            "CKV_NW_6",
            "The instance profile's role is the node role, which trusts only EC2 and holds no admin, *FullAccess, "
            "IAM or EC2 write rights",
            "Give the instance profile the node role (the one the controller may iam:PassRole), whose trust "
            "allows only Service ec2.amazonaws.com to sts:AssumeRole; attach only the node policies (never "
            "AdministratorAccess, PowerUserAccess, any *FullAccess policy, iam:* writes, or EC2 writes such as "
            "ec2:RunInstances/TerminateInstances; the VPC CNI's ENI actions are fine).",
            TF,
        ),
        CheckInfo(
            "CKV_NW_7",
            "The interruption queue is encrypted, TLS-only, writable only by this account's EventBridge rules, "
            "keeps messages briefly and is fed spot and state-change events",
            "Set sqs_managed_sse_enabled (or kms_master_key_id) and message_retention_seconds <= 900 (Karpenter: "
            "300); add a queue policy that Denies sqs:* when aws:SecureTransport is false and Allows "
            "events.amazonaws.com sqs:SendMessage with aws:SourceArn (the rules) or aws:SourceAccount (never a "
            "service or Principal * without one); route EventBridge "
            "rules for 'EC2 Spot Instance Interruption Warning' and 'EC2 Instance State-change Notification' to it.",
            TF,
        ),
        CheckInfo(
            "CKV_NW_8",
            "Every NodePool has limits",
            "Set spec.limits (cpu and/or memory) on the NodePool so a runaway scale-up stops at a bound.",
            K8S,
        ),
        CheckInfo(
            "CKV_NW_9",
            "Every NodePool that allows spot carries a NoSchedule taint (spot is opt-in)",
            "Add a NoSchedule taint to spec.template.spec.taints of the spot NodePool, so only pods that "
            "tolerate interruption land there.",
            K8S,
        ),
        CheckInfo(
            "CKV_NW_10",
            "Every EC2NodeClass requires IMDSv2 (httpTokens: required) with a hop limit of at most 2 and "
            "encrypts its EBS volumes",
            "Set spec.metadataOptions.httpTokens: required and httpPutResponseHopLimit: 1 (2 at most); never set "
            "blockDeviceMappings[].ebs.encrypted: false.",
            K8S,
        ),
        CheckInfo(
            "CKV_NW_11",
            "The controller's containers run as non-root, read-only root filesystem, no privilege escalation",
            "Set securityContext runAsNonRoot: true (and a non-zero runAsUser), readOnlyRootFilesystem: true, "
            "allowPrivilegeEscalation: false on every container of the controller.",
            ("kubernetes",),
        ),
        CheckInfo(
            "CKV_NW_12",
            "The controller's ServiceAccount carries the IRSA role annotation of the role that trusts it",
            "Annotate the ServiceAccount with eks.amazonaws.com/role-arn = the controller role's ARN, in the "
            "namespace and with the name its trust policy's :sub names (Pod Identity: install the release's "
            "ServiceAccount in the namespace and name the association names).",
            ("kubernetes", "terraform_json"),
        ),
        CheckInfo(
            "CKV_NW_13",
            "No Role or ClusterRole has a wildcard verb, resource or apiGroup in any rule, and no ClusterRole "
            "reads Secrets cluster-wide",
            "List the exact verbs, resources and API groups in every rule (the chart's RBAC table in "
            "docs/chart.md); read a Secret through a Role in its namespace, with resourceNames.",
            K8S,
        ),
        CheckInfo(
            "CKV_NW_14",
            "No NetworkPolicy ingress rule admits every port from every source",
            "Give each ingress rule the ports the pods serve (the chart: the metrics port) and, where known, "
            "the sources (networkPolicy.metricsFrom).",
            K8S,
        ),
    )
}


@dataclass(frozen=True)
class Finding:
    """A failed check on one object: ``path`` of the file, ``address`` (Terraform address or
    ``Kind.namespace.name``), ``message`` (what is wrong, with values)."""

    check_id: str
    path: str
    address: str
    message: str


@dataclass
class RuleReport:
    """What a rule looked at (``evaluated``: (check_id, path, address)) and what it found."""

    evaluated: set[tuple[str, str, str]] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)

    def passed(self, check_id: str, path: str, address: str) -> None:
        """Record that ``address`` is in the scope of ``check_id``."""
        self.evaluated.add((check_id, path, address))

    def failed(self, check_id: str, path: str, address: str, message: str) -> None:
        """Record a finding (and that the address was evaluated)."""
        self.passed(check_id, path, address)
        self.findings.append(Finding(check_id, path, address, message))

    def extend(self, other: RuleReport) -> None:
        """Merge another report into this one."""
        self.evaluated |= other.evaluated
        self.findings.extend(other.findings)

    def messages(self, check_id: str, path: str, address: str) -> list[str]:
        """Messages of the findings of ``check_id`` on one address (empty: it passed, if evaluated)."""
        return [f.message for f in self.findings if (f.check_id, f.path, f.address) == (check_id, path, address)]

    def ids(self) -> set[str]:
        """The check ids that failed somewhere."""
        return {f.check_id for f in self.findings}
