"""Node bootstrap userData per AMI family, merged with the user's ``EC2NodeClass.spec.userData``.

* **AL2023** (nodeadm): a MIME multipart archive whose first part is our nodeadm ``NodeConfig``
  (``node.eks.aws/v1alpha1``: cluster name, API server endpoint, CA, service CIDR, kubelet config with
  ``maxPods``, ``clusterDNS`` and ``registerWithTaints``, and a ``--node-labels`` flag), followed by the user's
  parts unchanged. nodeadm merges every NodeConfig part it finds, so the user's kubelet settings add to ours
  (Karpenter AL2023 behaviour). User data that is not MIME becomes one part: ``application/node.eks.aws``
  when it is a YAML mapping, else ``text/x-shellscript``.
* **Bottlerocket**: TOML. The user's document is parsed and ours is merged into it key by key, so every key
  the user set survives (the workshop's ``[settings.kubernetes] kube-api-qps = 30``) while the cluster
  identity keys (``cluster-name``, ``api-server``, ``cluster-certificate``, ``cluster-dns-ip``,
  ``max-pods``) and the NodeClaim's ``node-labels`` / ``node-taints`` are ours.
* **AL2**: a MIME archive with the user's parts first and an ``/etc/eks/bootstrap.sh`` script last.
* ``instanceStorePolicy: RAID0`` (Karpenter v1.x ``pkg/providers/amifamily/bootstrap``): AL2023 sets NodeConfig
  ``spec.instance.localStorage.strategy: RAID0``; AL2 passes ``--local-disks raid0`` to bootstrap.sh;
  Bottlerocket adds the ``settings.bootstrap-commands."000-mount-instance-storage"`` entry running
  ``apiclient ephemeral-storage init`` then ``bind``; Custom user data is the user's alone (they build the
  array themselves).

Sources: nodeadm ``NodeConfig`` API (awslabs/amazon-eks-ami), Bottlerocket settings reference, Karpenter's
AMI family documentation.
"""

from __future__ import annotations

import email
import email.policy
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tomli_w
import yaml

from nodewright.errors import NodewrightValidationError

MIME_BOUNDARY = "//"
CONTENT_TYPE_NODECONFIG = "application/node.eks.aws"
CONTENT_TYPE_SHELL = 'text/x-shellscript; charset="us-ascii"'


@dataclass(frozen=True, slots=True)
class Taint:
    """A Kubernetes node taint (``effect`` is NoSchedule, PreferNoSchedule or NoExecute)."""

    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    """Everything the node needs to join the cluster.

    Attributes:
        cluster_name: EKS cluster name.
        cluster_endpoint: API server URL, ``https://...``.
        ca_bundle: base64 of the cluster CA PEM (as ``eks:DescribeCluster`` returns it).
        cluster_cidr: Kubernetes service CIDR, e.g. ``"10.100.0.0/16"`` (required by nodeadm).
        labels: node labels to register with.
        taints: taints to register with (NodeClaim ``taints`` + ``startupTaints``).
        max_pods: kubelet ``maxPods``, or None for the AMI's default.
        cluster_dns: kubelet ``clusterDNS`` addresses, empty for the AMI's default.
        kubelet: extra kubelet configuration (KubeletConfiguration field names), from
            ``EC2NodeClass.spec.kubelet``.
        custom_user_data: the user's ``spec.userData`` or None.
        instance_store_policy: ``EC2NodeClass.spec.instanceStorePolicy`` (``"RAID0"`` or None). With RAID0 the
            node builds one RAID-0 array from its NVMe instance-store disks and puts the kubelet's and the
            container runtime's state on it, so the ``ephemeral-storage`` the scheduler counted
            (:func:`nodewright.cloud.overhead.ephemeral_volume_bytes`) is what the kubelet reports. Karpenter
            v1.x ``bootstrap.Options.InstanceStorePolicy``; each family's builder says how it asks for it.
        ami_version: the version half of the EC2NodeClass's ``amiSelectorTerms`` alias (``"latest"``,
            ``"v1.46.0"``), empty without an alias. Only Bottlerocket RAID0 reads it (see
            :func:`bottlerocket_default_bind`).
    """

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str = ""
    cluster_cidr: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    max_pods: int | None = None
    cluster_dns: Sequence[str] = ()
    kubelet: Mapping[str, Any] = field(default_factory=dict)
    custom_user_data: str | None = None
    instance_store_policy: str | None = None
    ami_version: str = ""

    @property
    def raid0(self) -> bool:
        """True when ``instanceStorePolicy`` is ``RAID0``."""
        return self.instance_store_policy == "RAID0"


# --- MIME ---------------------------------------------------------------------------------------------------


def parse_mime_parts(user_data: str) -> list[tuple[str, str]]:
    """``[(content_type_header, body), ...]`` of a user's userData.

    A MIME multipart archive yields its parts in order (base64 bodies decoded); anything else is one part
    whose type is guessed: a YAML mapping is a nodeadm NodeConfig, otherwise a shell script.

    Raises:
        NodewrightValidationError: ``spec.userData`` claims to be MIME but holds no parts.
    """
    text = user_data.strip()
    if not text:
        return []
    if text.startswith(("MIME-Version:", "Content-Type:")):
        message = email.message_from_string(user_data, policy=email.policy.compat32)
        parts = []
        for part in message.walk():
            if part.is_multipart():
                continue
            payload = part.get_payload(decode=True)
            body = payload.decode() if isinstance(payload, bytes) else str(part.get_payload())
            parts.append((str(part.get("Content-Type", CONTENT_TYPE_SHELL)), body))
        if not parts:
            raise NodewrightValidationError("spec.userData", "MIME userData has no parts")
        return parts
    return [(_guess_content_type(user_data), user_data)]


def _guess_content_type(body: str) -> str:
    if body.lstrip().startswith("#!"):
        return CONTENT_TYPE_SHELL
    try:
        loaded = yaml.safe_load(body)
    except yaml.YAMLError:
        return CONTENT_TYPE_SHELL
    return CONTENT_TYPE_NODECONFIG if isinstance(loaded, dict) else CONTENT_TYPE_SHELL


def mime_archive(parts: Sequence[tuple[str, str]]) -> str:
    """Serialize ``parts`` as a ``multipart/mixed`` archive with boundary ``//`` (deterministic text)."""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [f"--{MIME_BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip("\n")]
    lines += [f"--{MIME_BOUNDARY}--", ""]
    return "\n".join(lines)


# --- AL2023 -------------------------------------------------------------------------------------------------


def _label_flag(labels: Mapping[str, str]) -> str:
    return "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def nodeconfig(options: BootstrapOptions) -> dict[str, Any]:
    """The nodeadm ``NodeConfig`` document (as a dict) for ``options``."""
    cluster: dict[str, Any] = {"name": options.cluster_name, "apiServerEndpoint": options.cluster_endpoint}
    if options.ca_bundle:
        cluster["certificateAuthority"] = options.ca_bundle
    if options.cluster_cidr:
        cluster["cidr"] = options.cluster_cidr
    kubelet_config: dict[str, Any] = dict(options.kubelet)
    if options.max_pods is not None:
        kubelet_config["maxPods"] = options.max_pods
    if options.cluster_dns:
        kubelet_config["clusterDNS"] = list(options.cluster_dns)
    if options.taints:
        kubelet_config["registerWithTaints"] = [
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect} for t in options.taints
        ]
    kubelet: dict[str, Any] = {}
    if kubelet_config:
        kubelet["config"] = kubelet_config
    if options.labels:
        kubelet["flags"] = [_label_flag(options.labels)]
    spec: dict[str, Any] = {"cluster": cluster}
    if options.raid0:
        # nodeadm builds /dev/md/kubernetes from the instance-store disks and mounts the kubelet, containerd
        # and pod-log directories on it (NodeConfig ``spec.instance.localStorage``).
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if kubelet:
        spec["kubelet"] = kubelet
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def al2023_user_data(options: BootstrapOptions) -> str:
    """MIME archive: our NodeConfig first, then the user's parts (see module docstring)."""
    ours = yaml.safe_dump(nodeconfig(options), sort_keys=False, default_flow_style=False)
    custom = parse_mime_parts(options.custom_user_data or "")
    return mime_archive([(CONTENT_TYPE_NODECONFIG, ours), *custom])


# --- Bottlerocket -------------------------------------------------------------------------------------------


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = dict(value) if isinstance(value, Mapping) else value
    return base


#: Name of the Bottlerocket ``settings.bootstrap-commands`` entry that builds the RAID0 array (Karpenter's name,
#: so a node configured by either looks the same).
BOTTLEROCKET_RAID0_COMMAND = "000-mount-instance-storage"
#: Directories bound to the array on Bottlerocket releases before 1.46.0, which need them named.
BOTTLEROCKET_BIND_DIRS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")


def bottlerocket_default_bind(ami_version: str) -> bool:
    """Whether a Bottlerocket release binds the default directories with a bare ``apiclient ephemeral-storage
    bind``: ``latest`` or ``[v]MAJOR.MINOR.PATCH`` at least 1.46.0. Anything else (empty, ``v1.45.1``, an
    unparseable version) is False and the directories are named explicitly, which every release accepts.
    Karpenter v1.x ``version.SupportsDefaultBind``. Karpenter also guesses a version from AMI names and ids
    when there is no alias; we read only the alias, so such nodes get the explicit form.
    """
    if ami_version == "latest":
        return True
    parts = ami_version.lstrip("v").split(".")
    if len(parts) < 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return False
    return (int(parts[0]), int(parts[1])) >= (1, 46)


def bottlerocket_user_data(options: BootstrapOptions) -> str:
    """The user's TOML with our ``[settings.kubernetes]`` keys merged in (see module docstring).

    Raises:
        NodewrightValidationError: ``spec.userData`` is not valid TOML.
    """
    try:
        document: dict[str, Any] = tomllib.loads(options.custom_user_data or "")
    except tomllib.TOMLDecodeError as err:
        raise NodewrightValidationError("spec.userData", f"Bottlerocket userData is not valid TOML: {err}") from err
    kubernetes: dict[str, Any] = {"cluster-name": options.cluster_name, "api-server": options.cluster_endpoint}
    if options.ca_bundle:
        kubernetes["cluster-certificate"] = options.ca_bundle
    if options.cluster_dns:
        kubernetes["cluster-dns-ip"] = options.cluster_dns[0]
    if options.max_pods is not None:
        kubernetes["max-pods"] = options.max_pods
    kubernetes.update(_bottlerocket_kubelet(options.kubelet))
    if options.labels:
        kubernetes["node-labels"] = dict(sorted(options.labels.items()))
    if options.taints:
        taints: dict[str, list[str]] = {}
        for taint in options.taints:
            taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
        kubernetes["node-taints"] = taints
    settings: dict[str, Any] = {"kubernetes": kubernetes}
    if options.raid0:
        bind = ["apiclient", "ephemeral-storage", "bind"]
        if not bottlerocket_default_bind(options.ami_version):
            bind += ["--dirs", *BOTTLEROCKET_BIND_DIRS]
        settings["bootstrap-commands"] = {BOTTLEROCKET_RAID0_COMMAND: {
            "commands": [["apiclient", "ephemeral-storage", "init"], bind], "mode": "always", "essential": True}}
    _deep_merge(document, {"settings": settings})
    return tomli_w.dumps(document)


# --- kubelet settings on the families without a full kubelet configuration ------------------------------------

#: The ``spec.kubelet`` fields AL2 and Bottlerocket (and Windows) can apply: they bootstrap the kubelet through a
#: fixed set of parameters, not a KubeletConfiguration document. Any other field works on AL2023 only (Karpenter
#: v1.15 rejects it elsewhere with ``UnsupportedKubeletConfiguration``; :func:`unsupported_kubelet_fields`).
MAPPED_KUBELET_FIELDS = ("clusterDNS", "maxPods", "podsPerCore", "systemReserved", "kubeReserved", "evictionHard",
                         "evictionSoft", "evictionSoftGracePeriod", "evictionMaxPodGracePeriod",
                         "imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "cpuCFSQuota")


def unsupported_kubelet_fields(ami_family: str, kubelet: Mapping[str, Any]) -> list[str]:
    """Why ``kubelet`` (``spec.kubelet`` by its field names) cannot be applied on ``ami_family``: one entry per
    problem, empty when every field can. AL2023 (nodeadm takes a whole KubeletConfiguration) and Custom (the user's
    own bootstrap) accept anything. Karpenter v1.15 ``UnsupportedKubeletConfiguration``."""
    if ami_family in ("AL2023", "Custom", ""):
        return []
    problems = [f"kubelet.{name}: not supported on {ami_family} (only AL2023 applies fields beyond "
                f"{', '.join(MAPPED_KUBELET_FIELDS)})" for name in sorted(kubelet) if name not in MAPPED_KUBELET_FIELDS]
    if ami_family == "Bottlerocket" and kubelet.get("podsPerCore") is not None:
        problems.append("kubelet.podsPerCore: Bottlerocket does not apply podsPerCore")
    if len(kubelet.get("clusterDNS") or ()) > 1:
        problems.append(f"kubelet.clusterDNS: {ami_family} takes one address, got {len(kubelet['clusterDNS'])}")
    return problems


def _pairs(values: Mapping[str, Any], separator: str) -> str:
    return ",".join(f"{key}{separator}{value}" for key, value in sorted(values.items()))


def _kubelet_flags(kubelet: Mapping[str, Any]) -> list[str]:
    """kubelet command-line flags for the mapped fields (AL2 ``--kubelet-extra-args``; Karpenter
    ``bootstrap.Options.kubeletExtraArgs``), in a fixed order."""
    flags = []
    if kubelet.get("podsPerCore") is not None:
        flags.append(f"--pods-per-core={kubelet['podsPerCore']}")
    for name, flag, separator in (("systemReserved", "--system-reserved", "="), ("kubeReserved", "--kube-reserved", "="),
                                  ("evictionHard", "--eviction-hard", "<"), ("evictionSoft", "--eviction-soft", "<"),
                                  ("evictionSoftGracePeriod", "--eviction-soft-grace-period", "=")):
        if kubelet.get(name):
            flags.append(f"{flag}={_pairs(kubelet[name], separator)}")
    for name, flag in (("evictionMaxPodGracePeriod", "--eviction-max-pod-grace-period"),
                       ("imageGCHighThresholdPercent", "--image-gc-high-threshold"),
                       ("imageGCLowThresholdPercent", "--image-gc-low-threshold")):
        if kubelet.get(name) is not None:
            flags.append(f"{flag}={kubelet[name]}")
    if kubelet.get("cpuCFSQuota") is not None:
        flags.append(f"--cpu-cfs-quota={str(bool(kubelet['cpuCFSQuota'])).lower()}")
    return flags


def _bottlerocket_kubelet(kubelet: Mapping[str, Any]) -> dict[str, Any]:
    """``settings.kubernetes`` keys for the mapped fields (Bottlerocket settings reference; Karpenter
    ``bootstrap.Bottlerocket``). Image-GC thresholds are strings there."""
    out: dict[str, Any] = {}
    for name, key in (("systemReserved", "system-reserved"), ("kubeReserved", "kube-reserved"),
                      ("evictionHard", "eviction-hard"), ("evictionSoft", "eviction-soft"),
                      ("evictionSoftGracePeriod", "eviction-soft-grace-period")):
        if kubelet.get(name):
            out[key] = {k: str(v) for k, v in sorted(kubelet[name].items())}
    if kubelet.get("evictionMaxPodGracePeriod") is not None:
        out["eviction-max-pod-grace-period"] = int(kubelet["evictionMaxPodGracePeriod"])
    for name, key in (("imageGCHighThresholdPercent", "image-gc-high-threshold-percent"),
                      ("imageGCLowThresholdPercent", "image-gc-low-threshold-percent")):
        if kubelet.get(name) is not None:
            out[key] = str(kubelet[name])
    if kubelet.get("cpuCFSQuota") is not None:
        out["cpu-cfs-quota-enforced"] = bool(kubelet["cpuCFSQuota"])
    return out


def node_kubelet(kubelet: Any, resolved: Any) -> dict[str, Any]:
    """What goes to the node's kubelet besides ``maxPods`` and ``clusterDNS`` (their own options): every field
    of ``kubelet`` (an :class:`~nodewright.api.ec2nodeclass.KubeletConfiguration`, or None) by its
    KubeletConfiguration name, with ``kubeReserved``/``systemReserved`` taken from ``resolved`` (the
    :class:`~nodewright.cloud.overhead.KubeletSettings` of the launched instance type, expressions evaluated)."""
    if kubelet is None:
        return {}
    config: dict[str, Any] = kubelet.model_dump(by_alias=True, exclude_none=True, mode="json")
    config.pop("maxPods", None)
    config.pop("clusterDNS", None)
    for name, values in (("kubeReserved", resolved.kube_reserved), ("systemReserved", resolved.system_reserved)):
        if values:
            config[name] = {str(k): str(v) for k, v in values.items()}
    return config


# --- AL2 ----------------------------------------------------------------------------------------------------


def al2_user_data(options: BootstrapOptions) -> str:
    """MIME archive: the user's parts, then ``/etc/eks/bootstrap.sh`` with our kubelet arguments."""
    kubelet_args = []
    if options.labels:
        kubelet_args.append(_label_flag(options.labels))
    if options.taints:
        kubelet_args.append("--register-with-taints=" + ",".join(
            f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in options.taints))
    if options.max_pods is not None:
        kubelet_args.append(f"--max-pods={options.max_pods}")
    kubelet_args += _kubelet_flags(options.kubelet)
    command = ["/etc/eks/bootstrap.sh", options.cluster_name, "--apiserver-endpoint", options.cluster_endpoint]
    if options.ca_bundle:
        command += ["--b64-cluster-ca", options.ca_bundle]
    if options.max_pods is not None:
        command += ["--use-max-pods", "false"]
    if options.cluster_dns:
        command += ["--dns-cluster-ip", options.cluster_dns[0]]
    if kubelet_args:
        command += ["--kubelet-extra-args", " ".join(kubelet_args)]
    if options.raid0:
        # bootstrap.sh's setup-local-disks builds the array and moves the kubelet/containerd state onto it.
        command += ["--local-disks", "raid0"]
    script = "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log) 2>&1\n" + shlex.join(command) + "\n"
    custom = parse_mime_parts(options.custom_user_data or "")
    return mime_archive([*custom, (CONTENT_TYPE_SHELL, script)])


def user_data(ami_family: str, options: BootstrapOptions) -> str:
    """userData text for ``ami_family`` (``AL2023``, ``Bottlerocket``, ``AL2``; ``Custom`` returns the
    user's data unchanged).

    Raises:
        NodewrightValidationError: unknown family, or user data that cannot be merged.
    """
    builders = {"AL2023": al2023_user_data, "Bottlerocket": bottlerocket_user_data, "AL2": al2_user_data}
    if ami_family == "Custom":
        return options.custom_user_data or ""
    if ami_family not in builders:
        raise NodewrightValidationError("spec.amiFamily", f"unsupported AMI family {ami_family!r}; "
                                        f"use one of AL2023, Bottlerocket, AL2, Custom")
    return builders[ami_family](options)
