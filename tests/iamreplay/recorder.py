"""Record every AWS call the controller makes and judge it against the stacks' IAM policies as it happens.

Hook: a botocore event handler on ``before-parameter-build.*.*``, appended to botocore's built-in handlers so
every botocore session created afterwards (the unit tests' shared session, the integration tests' moto-server
clients, each controller's) carries it. A call counts as the controller's when ``nodewright/`` code is on the
call stack, so the tests' own seeding and assertions (``create_vpc``, ``describe_instances`` to check a
result) are not judged. The hook runs before the request is sent, so the moto account it reads (tags of the
launch template a fleet references, of the instance being terminated...) is the state IAM would see.

Each call becomes its IAM authorizations (:mod:`.calls`), each authorization is evaluated (:mod:`.evaluator`)
against the controller's policies for IRSA and for Pod Identity (:mod:`.policy`); the role assumption of each
mode is evaluated against its trust once. A denial names the call, the resource and the statement closest to
allowing it. Calls on resources the account does not hold (stubbed clients, deliberately missing instances) are
counted as unresolved: their tags, and so IAM's answer, are unknown offline.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .calls import Call, LaunchTemplateFacts, UnknownResource, UnmappedCall, authorizations
from .evaluator import Decision, Request, all_statements, evaluate, tag_context
from .policy import IDENTITY_MODES, Binding, Document, controller_documents

NODEWRIGHT_DIR = str(Path(__file__).resolve().parents[2] / "nodewright")


class MotoState:
    """The moto account (in this process: ``mock_aws`` or ``ThreadedMotoServer``) read directly."""

    def __init__(self, account: str) -> None:
        self.account = account

    def _ec2(self, region: str) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[self.account][region]

    def ec2_tags(self, region: str, resource_id: str) -> dict[str, str] | None:
        backend = self._ec2(region)
        if resource_id.startswith("i-"):
            live = [i for r in list(backend.reservations.values()) for i in r.instances if i.id == resource_id]
            if not live:
                return None
        return dict(backend.tags.get(resource_id, {}))

    def launch_template(self, region: str, name: str | None, template_id: str | None) -> LaunchTemplateFacts | None:
        backend = self._ec2(region)
        for template in list(backend.launch_templates.values()):
            if template.id == template_id or (name is not None and template.name == name):
                return LaunchTemplateFacts(template.id, dict(backend.tags.get(template.id, {})),
                                           dict(template.latest_version().data))
        return None

    def placement_group_name(self, region: str, group_id: str) -> str | None:
        """moto keeps no placement groups: a group given by id cannot be named (the call counts as unresolved)."""
        groups = getattr(self._ec2(region), "placement_groups", {})
        return next((g.name for g in list(groups.values()) if getattr(g, "id", None) == group_id), None)

    def instance_profile(self, name: str) -> tuple[dict[str, str], list[str]] | None:
        from moto.iam.models import iam_backends

        for profile in list(iam_backends[self.account]["global"].instance_profiles.values()):
            if profile.name == name:
                tags = {t["Key"]: t["Value"] for t in profile.tags} if isinstance(profile.tags, list) \
                    else dict(profile.tags)
                return tags, [r.name for r in profile.roles]
        return None


@dataclass
class Tally:
    """What the replay saw: calls, authorizations evaluated (per mode), denials and unresolved calls."""

    calls: int = 0
    evaluated: int = 0
    used: set[str] = field(default_factory=set)
    denials: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    by_call: dict[str, int] = field(default_factory=dict)


def denial_message(mode: str, request: Request, decision: Decision, test: str) -> str:
    """``DENIED [mode] <call> on <resource>: <statement> <why> (test)``."""
    expected = decision.statement or "no statement"
    return (f"IAM replay DENIED [{mode}] {request.action} by {request.call} on {request.resource}: expected "
            f"{expected} to allow it, but {decision.reason} (in {test})")


class Recorder:
    """Evaluates the controller's calls while :attr:`test` is set (see ``tests/conftest.py``)."""

    def __init__(self, binding: Binding | None = None) -> None:
        self.binding = binding or Binding()
        self.documents: dict[str, tuple[dict[str, Document], Document]] = {}
        self.total = Tally()
        self.current = Tally()
        self.test: str | None = None
        self._lock = threading.Lock()

    def _policies(self) -> dict[str, tuple[dict[str, Document], Document]]:
        if not self.documents:
            self.documents = {mode: controller_documents(mode, self.binding) for mode in IDENTITY_MODES}
            self._evaluate_assumption()
        return self.documents

    # --- the botocore hook ---------------------------------------------------------------------------------

    def on_call(self, params: Mapping[str, Any], model: Any, context: Mapping[str, Any] | None = None,
                **_: Any) -> None:
        """``before-parameter-build`` handler: judge the call when it is the controller's."""
        if self.test is None or not _from_controller():
            return
        service = model.service_model.signing_name
        region = (context or {}).get("client_region") or self.binding.region
        call = Call(service, model.name, dict(params), region, self.binding.account, self.binding.partition)
        try:
            requests = authorizations(call, MotoState(self.binding.account))
        except UnknownResource as err:
            self._record(call.name, unresolved=f"{call.name}: {err} is not in the account (in {self.test})")
            return
        except UnmappedCall as err:
            self._record(call.name, denials=[f"{err} (in {self.test})"])
            return
        denials = []
        evaluated = 0
        used = set()
        for mode, (permissions, _trust) in self._policies().items():
            for request in requests:
                decision = evaluate(permissions, request)
                evaluated += 1
                if decision.allowed and decision.statement:
                    used.add(decision.statement)
                else:
                    denials.append(denial_message(mode, request, decision, self.test or ""))
        self._record(call.name, evaluated=evaluated, denials=denials, used=used)

    def _record(self, name: str, evaluated: int = 0, denials: list[str] | None = None,
                unresolved: str | None = None, call: bool = True, used: set[str] | None = None) -> None:
        with self._lock:
            for tally in (self.total, self.current):
                tally.used |= used or set()
                tally.calls += int(call)
                tally.evaluated += evaluated
                tally.by_call[name] = tally.by_call.get(name, 0) + 1
                tally.denials.extend(denials or [])
                if unresolved:
                    tally.unresolved.append(unresolved)

    def _evaluate_assumption(self) -> None:
        """How the controller gets its role in each mode, against that mode's trust (once per session)."""
        binding = self.binding
        role = binding.controller_role_arn
        subject = binding.subject
        irsa = Request("sts:AssumeRoleWithWebIdentity", role, {
            f"{binding.oidc_issuer_host}:sub": (subject,), f"{binding.oidc_issuer_host}:aud": ("sts.amazonaws.com",)},
            principal=("Federated", binding.oidc_provider_arn),
            call="IRSA token exchange")
        session_tags = {
            "eks-cluster-arn": binding.cluster_arn,
            "eks-cluster-name": binding.cluster, "kubernetes-namespace": "kube-system",
            "kubernetes-service-account": "nodewright", "kubernetes-pod-name": "nodewright-7d9f8-abcde",
            "kubernetes-pod-uid": "0f8e4a8c-1111-4c3b-9d7e-2f6a5b4c3d2e"}
        # What EKS Pod Identity documents it sends: the session tags (EKS user guide, "Enable or disable session
        # tags"); nothing else is assumed.
        pod_context = tag_context("aws:RequestTag", session_tags)
        pod = [Request(action, role, pod_context, principal=("Service", "pods.eks.amazonaws.com"),
                       call="EKS Pod Identity credentials") for action in ("sts:AssumeRole", "sts:TagSession")]
        for mode, requests in (("irsa", [irsa]), ("pod-identity", pod)):
            trust = self.documents[mode][1]
            for request in requests:
                decision = evaluate({"trust": trust}, request, trust=True)
                denials = [] if decision.allowed else [denial_message(mode, request, decision, "role assumption")]
                self._record(request.action, evaluated=1, denials=denials, call=False)

    # --- per test --------------------------------------------------------------------------------------------

    def unused_statements(self) -> list[str]:
        """``policy/Sid`` of the permission statements no judged call needed (candidates for removal)."""
        if not self.documents:
            return []
        permissions = self.documents["irsa"][0]
        return [name for name, _ in all_statements(permissions) if name not in self.total.used]

    def prepare(self) -> None:
        """Load the synthesized documents (synthesizing them when the cache is cold, ~25 s per identity mode) and
        judge the role assumptions: called once after collection, so no test's timeout pays for it."""
        self._policies()

    def begin(self, test: str) -> None:
        self._policies()  # load (and judge the role assumptions) before any controller thread calls AWS
        with self._lock:
            self.current = Tally()
            self.test = test

    def end(self) -> Tally:
        with self._lock:
            self.test = None
            return self.current


def _from_controller() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(NODEWRIGHT_DIR):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


RECORDER = Recorder()
_INSTALLED: list[bool] = []


def install() -> None:
    """Append the hook to botocore's built-in handlers (once): every session created from now on carries it."""
    if _INSTALLED:
        return
    from botocore import handlers

    handlers.BUILTIN_HANDLERS.append(("before-parameter-build", RECORDER.on_call))
    _INSTALLED.append(True)
