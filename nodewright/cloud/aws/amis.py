"""AMIs of an EC2NodeClass: aliases through AWS's public SSM parameters, other terms through DescribeImages.

Aliases (``al2023@latest|vYYYYMMDD``, ``bottlerocket@latest|vX.Y.Z``, ``al2@latest``) resolve for the
cluster's Kubernetes version and every architecture/variant the family publishes (parameter paths from the
EKS user guide "Retrieve recommended AMI IDs" and Bottlerocket's "Retrieve Bottlerocket AMI IDs"):

* AL2023: ``/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/recommended/image_id``
  with variants ``standard`` and ``nvidia`` (x86_64 and arm64) and ``neuron`` (x86_64).
* Bottlerocket: ``/aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<arch>/<latest|X.Y.Z>/image_id``.
* AL2: ``/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2[-arm64|-gpu]/recommended/image_id``.

Other terms (``id``, ``name``, ``tags``, ``owner``, ``ssmParameter``) go to ``ec2:DescribeImages``; names
without an owner search ``self`` and ``amazon`` (Karpenter's default). Results are newest first.
Refresh policy: 5 minutes, so a new ``latest`` AMI is picked up (and existing nodes drift) within that.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api import labels
from nodewright.api.ec2nodeclass import AMISelectorTerm
from nodewright.cloud.aws.cache import Clock, TTLCache
from nodewright.cloud.aws.errors import error_code, is_authorization_error, translate
from nodewright.cloud.aws.filters import tag_filters

log = logging.getLogger(__name__)

AMI_TTL_SECONDS = 300.0
VARIANT_STANDARD = "standard"
VARIANT_NVIDIA = "nvidia"
VARIANT_NEURON = "neuron"
_EC2_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


@dataclass(frozen=True, slots=True)
class AMI:
    """A resolved image.

    Attributes:
        id: ``ami-...``.
        name: image name (``""`` when DescribeImages did not return it).
        arch: Kubernetes architecture, ``"amd64"`` or ``"arm64"``.
        variant: ``"standard"``, ``"nvidia"``, ``"neuron"`` for alias AMIs; ``""`` for AMIs chosen by
            id/name/tags, which fit any instance type of their architecture.
        creation_date: ISO 8601 text from EC2, for newest-first ordering.
    """

    id: str
    name: str
    arch: str
    variant: str = ""
    creation_date: str = ""

    def status(self) -> dict[str, object]:
        """``EC2NodeClass.status.amis[]`` entry: id, name and the requirements it serves (Karpenter shape)."""
        requirements: list[dict[str, object]] = [{"key": labels.ARCH, "operator": "In", "values": [self.arch]}]
        if self.variant == VARIANT_STANDARD:
            requirements += [{"key": labels.INSTANCE_GPU_COUNT, "operator": "DoesNotExist"},
                             {"key": labels.INSTANCE_ACCELERATOR_COUNT, "operator": "DoesNotExist"}]
        elif self.variant == VARIANT_NVIDIA:
            requirements.append({"key": labels.INSTANCE_GPU_COUNT, "operator": "Exists"})
        elif self.variant == VARIANT_NEURON:
            requirements.append({"key": labels.INSTANCE_ACCELERATOR_COUNT, "operator": "Exists"})
        return {"id": self.id, "name": self.name, "requirements": requirements}

    def fits(self, instance_labels: Mapping[str, str]) -> bool:
        """Whether an instance type with these well-known labels can boot this AMI."""
        if instance_labels.get(labels.ARCH) != self.arch:
            return False
        gpus = int(instance_labels.get(labels.INSTANCE_GPU_COUNT, "0") or 0)
        accelerators = int(instance_labels.get(labels.INSTANCE_ACCELERATOR_COUNT, "0") or 0)
        if self.variant == VARIANT_STANDARD:
            return gpus == 0 and accelerators == 0
        if self.variant == VARIANT_NVIDIA:
            return gpus > 0 and instance_labels.get(labels.INSTANCE_GPU_MANUFACTURER, "nvidia") == "nvidia"
        if self.variant == VARIANT_NEURON:
            return accelerators > 0
        return True


@dataclass(frozen=True, slots=True)
class AliasParameter:
    """One SSM parameter an alias reads, with the architecture and variant of the AMI it names."""

    path: str
    arch: str
    variant: str


def alias_parameters(alias: str, kubernetes_version: str) -> list[AliasParameter]:
    """SSM parameters for ``alias`` (``family@version``) on Kubernetes ``kubernetes_version`` (``"1.31"``).

    Raises:
        ValueError: unknown alias family.
    """
    family, _, version = alias.partition("@")
    k8s = kubernetes_version
    if family == "al2023":
        combos = [("x86_64", VARIANT_STANDARD), ("x86_64", VARIANT_NVIDIA), ("x86_64", VARIANT_NEURON),
                  ("arm64", VARIANT_STANDARD), ("arm64", VARIANT_NVIDIA)]
        out = []
        for arch, variant in combos:
            name = "recommended" if version == "latest" else f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{version}"
            out.append(AliasParameter(
                f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/{name}/image_id",
                _EC2_ARCH[arch], variant))
        return out
    if family == "bottlerocket":
        release = "latest" if version == "latest" else version.removeprefix("v")
        return [AliasParameter(f"/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/{release}/image_id",
                               _EC2_ARCH[arch], variant)
                for arch in ("x86_64", "arm64")
                for suffix, variant in (("", VARIANT_STANDARD), ("-nvidia", VARIANT_NVIDIA))]
    if family == "al2":
        name = "recommended" if version == "latest" else f"amazon-eks-node-{k8s}-{version}"
        return [AliasParameter(f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}/{name}/image_id",
                               arch, variant)
                for suffix, arch, variant in (("", "amd64", VARIANT_STANDARD), ("-arm64", "arm64", VARIANT_STANDARD),
                                              ("-gpu", "amd64", VARIANT_NVIDIA))]
    raise ValueError(f"unknown AMI alias family {family!r} in {alias!r}")


def _image(raw: Mapping[str, Any], variant: str = "", arch: str | None = None) -> AMI:
    return AMI(id=raw["ImageId"], name=raw.get("Name", ""),
               arch=arch or _EC2_ARCH.get(raw.get("Architecture", ""), raw.get("Architecture", "")),
               variant=variant, creation_date=raw.get("CreationDate", ""))


def newest_first(amis: Sequence[AMI]) -> list[AMI]:
    """AMIs sorted newest first (by creation date, then name, then id for a stable order)."""
    return sorted(amis, key=lambda a: (a.creation_date, a.name, a.id), reverse=True)


class AMIProvider:
    """Resolves ``amiSelectorTerms`` to AMIs, cached for :data:`AMI_TTL_SECONDS`."""

    def __init__(self, ec2: Any, ssm: Any, kubernetes_version: str, clock: Clock = time.monotonic,
                 ttl: float = AMI_TTL_SECONDS) -> None:
        self._ec2 = ec2
        self._ssm = ssm
        self.kubernetes_version = kubernetes_version
        self._cache: TTLCache[list[AMI]] = TTLCache(ttl, clock)

    def resolve(self, terms: Sequence[AMISelectorTerm]) -> list[AMI]:
        """AMIs matching any term, newest first (duplicates removed).

        Raises:
            AuthorizationError: ``ssm:GetParameter`` or ``ec2:DescribeImages`` denied.
            LaunchError: any other AWS error.
        """
        key = json.dumps([t.to_manifest() for t in terms], sort_keys=True)
        return self._cache.get_or_load(key, lambda: self._resolve(terms))

    def _resolve(self, terms: Sequence[AMISelectorTerm]) -> list[AMI]:
        found: dict[str, AMI] = {}
        for term in terms:
            amis = self._alias(term.alias) if term.alias else self._describe_term(term)
            for ami in amis:
                found.setdefault(ami.id, ami)
        return newest_first(list(found.values()))

    def _parameter(self, path: str) -> str | None:
        try:
            return str(self._ssm.get_parameter(Name=path)["Parameter"]["Value"])
        except ClientError as err:
            if is_authorization_error(error_code(err)):
                raise translate(err, operation="ssm:GetParameter") from err
            # Not every family publishes every arch/variant (e.g. no arm64 Neuron): skip quietly.
            log.debug("AMI parameter unavailable", extra={"path": path, "code": error_code(err)})
            return None

    def _alias(self, alias: str) -> list[AMI]:
        wanted: dict[str, AliasParameter] = {}
        for parameter in alias_parameters(alias, self.kubernetes_version):
            image_id = self._parameter(parameter.path)
            if image_id:
                wanted.setdefault(image_id, parameter)
        if not wanted:
            return []
        described = {raw["ImageId"]: raw for raw in self._describe(
            Filters=[{"Name": "image-id", "Values": sorted(wanted)}])}
        amis = []
        for image_id, parameter in wanted.items():
            if image_id not in described:
                log.warning("AMI from SSM parameter not found", extra={"ami": image_id, "path": parameter.path})
                continue
            amis.append(_image(described[image_id], parameter.variant, parameter.arch))
        return amis

    def _describe_term(self, term: AMISelectorTerm) -> list[AMI]:
        if term.ssm_parameter:
            image_id = self._parameter(term.ssm_parameter)
            return [_image(raw) for raw in self._describe(Filters=[{"Name": "image-id", "Values": [image_id]}])] \
                if image_id else []
        kwargs: dict[str, Any] = {}
        filters: list[dict[str, Any]] = []
        if term.id:
            filters.append({"Name": "image-id", "Values": [term.id]})
        if term.name:
            filters.append({"Name": "name", "Values": [term.name]})
        filters += tag_filters(term.tags)
        if term.owner:
            kwargs["Owners"] = [term.owner]
        elif term.name and not term.id:
            kwargs["Owners"] = ["self", "amazon"]
        return [_image(raw) for raw in self._describe(Filters=filters, **kwargs)]

    def _describe(self, **kwargs: Any) -> list[dict[str, Any]]:
        try:
            images: list[dict[str, Any]] = []
            for page in self._ec2.get_paginator("describe_images").paginate(**kwargs):
                images += page.get("Images", [])
            return images
        except ClientError as err:
            raise translate(err, operation="ec2:DescribeImages") from err
