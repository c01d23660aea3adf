"""userData merges: exact documents for AL2023 (MIME + nodeadm NodeConfig), Bottlerocket (TOML), AL2."""

from __future__ import annotations

import tomllib

import pytest

from nodewright.cloud.aws.userdata import BootstrapOptions, Taint, parse_mime_parts, user_data
from nodewright.errors import NodewrightValidationError

BASE = {"cluster_name": "demo", "cluster_endpoint": "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com",
        "ca_bundle": "Q0EtREFUQQ==", "cluster_cidr": "10.100.0.0/16",
        "labels": {"karpenter.sh/nodepool": "team1", "intent": "apps"}, "taints": [Taint("team1", "NoSchedule")],
        "max_pods": 58}

NODECONFIG = """apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: demo
    apiServerEndpoint: https://ABCDEF.gr7.us-east-1.eks.amazonaws.com
    certificateAuthority: Q0EtREFUQQ==
    cidr: 10.100.0.0/16
  kubelet:
    config:
      maxPods: 58
      registerWithTaints:
      - key: team1
        effect: NoSchedule
    flags:
    - --node-labels=intent=apps,karpenter.sh/nodepool=team1"""


def test_al2023_shell_user_data_becomes_second_mime_part() -> None:
    got = user_data("AL2023", BootstrapOptions(**BASE, custom_user_data="#!/bin/bash\necho 'hello'\n"))
    assert got == f"""MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

{NODECONFIG}
--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo 'hello'
--//--
"""


def test_al2023_user_mime_archive_keeps_its_parts_in_order() -> None:
    custom = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      shutdownGracePeriod: 30s
--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo second
--BOUNDARY--
"""
    got = user_data("AL2023", BootstrapOptions(**BASE, custom_user_data=custom))
    assert got == f"""MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

{NODECONFIG}
--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      shutdownGracePeriod: 30s
--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo second
--//--
"""


def test_al2023_plain_nodeconfig_yaml_is_typed_as_nodeconfig() -> None:
    parts = parse_mime_parts("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n")
    assert parts == [("application/node.eks.aws", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n")]


#: Bottlerocket TOML for BASE with the user's ``kube-api-qps = 30`` kept first.
BOTTLEROCKET_KUBERNETES = """[settings.kubernetes]
kube-api-qps = 30
cluster-name = "demo"
api-server = "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"
cluster-certificate = "Q0EtREFUQQ=="
max-pods = 58

[settings.kubernetes.node-labels]
intent = "apps"
"karpenter.sh/nodepool" = "team1"

[settings.kubernetes.node-taints]
team1 = [
    ":NoSchedule",
]
"""


def test_bottlerocket_merge_keeps_users_kube_api_qps() -> None:
    got = user_data("Bottlerocket", BootstrapOptions(**BASE, custom_user_data="[settings.kubernetes]\nkube-api-qps = 30\n"))
    assert got == BOTTLEROCKET_KUBERNETES
    assert tomllib.loads(got)["settings"]["kubernetes"]["kube-api-qps"] == 30


def test_bottlerocket_merges_user_labels_and_other_tables() -> None:
    custom = ('[settings.host-containers.admin]\nenabled = true\n\n'
              '[settings.kubernetes.node-labels]\n"example.com/owner" = "team1"\n')
    doc = tomllib.loads(user_data("Bottlerocket", BootstrapOptions(**BASE, custom_user_data=custom)))
    assert doc["settings"]["host-containers"] == {"admin": {"enabled": True}}
    assert doc["settings"]["kubernetes"]["node-labels"] == {
        "example.com/owner": "team1", "intent": "apps", "karpenter.sh/nodepool": "team1"}


def test_bottlerocket_invalid_toml_names_the_field() -> None:
    with pytest.raises(NodewrightValidationError, match=r"^spec.userData: Bottlerocket userData is not valid TOML"):
        user_data("Bottlerocket", BootstrapOptions(**BASE, custom_user_data="[settings.kubernetes\n"))


def test_al2_bootstrap_script_follows_user_parts() -> None:
    got = user_data("AL2", BootstrapOptions(**{**BASE, "taints": [Taint("team1", "NoSchedule", "x")]}))
    assert got.endswith("""Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash -xe
exec > >(tee /var/log/user-data.log) 2>&1
/etc/eks/bootstrap.sh demo --apiserver-endpoint https://ABCDEF.gr7.us-east-1.eks.amazonaws.com \
--b64-cluster-ca Q0EtREFUQQ== --use-max-pods false --kubelet-extra-args \
'--node-labels=intent=apps,karpenter.sh/nodepool=team1 --register-with-taints=team1=x:NoSchedule --max-pods=58'
--//--
""")


def test_unknown_family_is_rejected() -> None:
    with pytest.raises(NodewrightValidationError, match="unsupported AMI family 'Ubuntu'"):
        user_data("Ubuntu", BootstrapOptions(**BASE))


def test_bottlerocket_keeps_user_datetimes_and_control_characters() -> None:
    # Found with the hand-written writer: a TOML datetime in the user's document raised TypeError, and
    # U+007F (DEL) was written unescaped, which TOML forbids in basic strings.
    custom = ('[settings.updates]\nscheduled = 2026-07-01T04:00:00Z\n'
              '[settings.kubernetes]\nprovider-id = "a\\u007fb"\n')
    got = user_data("Bottlerocket", BootstrapOptions(**BASE, custom_user_data=custom))
    doc = tomllib.loads(got)
    assert doc["settings"]["updates"]["scheduled"] == tomllib.loads(custom)["settings"]["updates"]["scheduled"]
    assert doc["settings"]["kubernetes"]["provider-id"] == "a\x7fb"
    assert "\x7f" not in got


# --- instanceStorePolicy: RAID0 (Karpenter v1.x pkg/providers/amifamily/bootstrap) ---------------------------

RAID0 = {**BASE, "instance_store_policy": "RAID0"}


def test_al2023_raid0_asks_nodeadm_for_a_raid0_local_storage_strategy() -> None:
    # NODECONFIG with ``spec.instance`` between ``cluster`` and ``kubelet`` (nodeadm's field order).
    raid0_nodeconfig = NODECONFIG.replace("""    cidr: 10.100.0.0/16
  kubelet:""", """    cidr: 10.100.0.0/16
  instance:
    localStorage:
      strategy: RAID0
  kubelet:""")
    assert raid0_nodeconfig != NODECONFIG
    got = user_data("AL2023", BootstrapOptions(**RAID0))
    assert got == f"""MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

{raid0_nodeconfig}
--//--
"""


def test_al2_raid0_passes_local_disks_to_bootstrap_sh() -> None:
    got = user_data("AL2", BootstrapOptions(**RAID0))
    assert got == """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash -xe
exec > >(tee /var/log/user-data.log) 2>&1
/etc/eks/bootstrap.sh demo --apiserver-endpoint https://ABCDEF.gr7.us-east-1.eks.amazonaws.com \
--b64-cluster-ca Q0EtREFUQQ== --use-max-pods false --kubelet-extra-args \
'--node-labels=intent=apps,karpenter.sh/nodepool=team1 --register-with-taints=team1:NoSchedule --max-pods=58' \
--local-disks raid0
--//--
"""


def test_bottlerocket_raid0_before_1_46_binds_named_directories() -> None:
    got = user_data("Bottlerocket", BootstrapOptions(**RAID0, ami_version="v1.45.0",
                                                     custom_user_data="[settings.kubernetes]\nkube-api-qps = 30\n"))
    assert got == BOTTLEROCKET_KUBERNETES + """
[settings.bootstrap-commands.000-mount-instance-storage]
commands = [
    [
        "apiclient",
        "ephemeral-storage",
        "init",
    ],
    [
        "apiclient",
        "ephemeral-storage",
        "bind",
        "--dirs",
        "/var/lib/containerd",
        "/var/lib/kubelet",
        "/var/log/pods",
    ],
]
mode = "always"
essential = true
"""


@pytest.mark.parametrize(("version", "bind"), [
    ("latest", ["apiclient", "ephemeral-storage", "bind"]),
    ("v1.46.0", ["apiclient", "ephemeral-storage", "bind"]),
    ("2.0.1", ["apiclient", "ephemeral-storage", "bind"]),
    ("v1.45.3", ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet",
                 "/var/log/pods"]),
    ("", ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet",
          "/var/log/pods"]),
    ("v1.46", ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet",
               "/var/log/pods"]),
])
def test_bottlerocket_raid0_bind_command_follows_the_alias_version(version: str, bind: list[str]) -> None:
    doc = tomllib.loads(user_data("Bottlerocket", BootstrapOptions(**RAID0, ami_version=version)))
    assert doc["settings"]["bootstrap-commands"] == {"000-mount-instance-storage": {
        "commands": [["apiclient", "ephemeral-storage", "init"], bind], "mode": "always", "essential": True}}


def test_custom_family_raid0_leaves_user_data_alone() -> None:
    assert user_data("Custom", BootstrapOptions(**RAID0, custom_user_data="#!/bin/bash\necho hi\n")) == \
        "#!/bin/bash\necho hi\n"


@pytest.mark.parametrize("family", ["AL2023", "AL2", "Bottlerocket"])
def test_without_raid0_no_family_mentions_local_storage(family: str) -> None:
    got = user_data(family, BootstrapOptions(**BASE, ami_version="latest"))
    assert "RAID0" not in got and "raid0" not in got and "ephemeral-storage" not in got
