"""Snapshot files: round trip, kubectl output, redaction, refusals (one line each, exit 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.errors import NodewrightValidationError
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.whatif.dryrun import dry_run
from nodewright.whatif.snapshot import (
    ANN_OBJECTS,
    SNAPSHOT_KINDS,
    cluster_role,
    collect,
    read_snapshot,
    redact,
    stable_hash,
    write_snapshot,
)
from tests.unit.whatif.cluster import NOW, cluster, nodepool


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_round_trip_keeps_every_object_and_the_header(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"s{suffix}"
    assert write_snapshot(path, cluster(), time=NOW) == 23
    snap = read_snapshot(path)
    assert (snap.time, snap.karpenter_version, snap.version, snap.redacted) == (NOW, "v1.15.1", "1", False)
    assert [o["kind"] for o in snap.objects][:4] == ["NodePool", "EC2NodeClass", "NodeClaim", "NodeClaim"]
    assert len(snap.of_kind("Pod")) == 9 and len(snap.of_kind("Node")) == 4
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in cluster()}
    for obj in snap.objects:
        assert obj == by_name[(obj["kind"], obj["metadata"]["name"])]
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file was renamed


def test_kubectl_get_output_is_read_as_a_snapshot_without_time(tmp_path: Path) -> None:
    path = tmp_path / "kubectl.yaml"
    items = cluster()
    # `kubectl get nodepools,nodes -o yaml` then `kubectl get pods -A -o yaml`: two Lists, no header.
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                    "items": items[:10]}) + "---\n"
                    + yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items[10:]}))
    snap = read_snapshot(path)
    assert snap.time is None and snap.version == "" and len(snap.objects) == 23
    result = run("snapshot", "--from-file", str(path), "-o", str(tmp_path / "out.json"))
    assert result.exit_code == 0, result.output
    assert len(read_snapshot(tmp_path / "out.json").objects) == 23


def test_redaction_hashes_names_and_labels_everywhere_and_decides_the_same(tmp_path: Path) -> None:
    plain_objects = cluster()
    web = next(o for o in plain_objects if o["metadata"]["name"] == "web-5d8f-a")
    web["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": "s3cr3t"}]
    objects = redact(plain_objects)
    text = json.dumps(objects)
    for secret in ("ip-10-0-1-1", "web-5d8f-a", "s3cr3t", "nginx", "KarpenterNodeRole-demo", '"app"', "db-0"):
        assert secret not in text
    assert stable_hash("ip-10-0-1-1") == "h-" + __import__("hashlib").sha256(b"ip-10-0-1-1").hexdigest()[:10]
    pod = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == stable_hash("db-0"))
    assert pod["spec"]["nodeName"] == stable_hash("ip-10-0-1-3")
    pdb = next(o for o in objects if o["kind"] == "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]  # still selects the same pod
    node = next(o for o in objects if o["kind"] == "Node")
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.xlarge"  # well-known labels stay
    write_snapshot(tmp_path / "r.yaml", cluster(), time=NOW, redact_names=True)
    plain, hashed = (dry_run(read_snapshot(p)) for p in (_write(tmp_path / "p.yaml"), tmp_path / "r.yaml"))
    assert read_snapshot(tmp_path / "r.yaml").redacted
    assert [m["decision"] and m["decision"]["message"] for m in hashed["disruption"]["methods"]] == \
        [m["decision"] and m["decision"]["message"] for m in plain["disruption"]["methods"]]
    def fates(result: dict[str, Any]) -> list[tuple[str, str, str | None]]:  # node names differ: compare the rest
        return sorted((n["instance_type"], n["reason"].split(" ")[0], n["disrupted_by"])
                      for n in result["disruption"]["nodes"])

    assert fates(hashed) == fates(plain)
    assert [c["instance_type"] for c in hashed["provisioning"]["nodeclaims"]] == \
        [c["instance_type"] for c in plain["provisioning"]["nodeclaims"]]


def _write(path: Path) -> Path:
    write_snapshot(path, cluster(), time=NOW)
    return path


def _bad(tmp_path: Path, text: str, name: str = "bad.yaml") -> tuple[int, str]:
    path = tmp_path / name
    path.write_text(text)
    out = tmp_path / "out.yaml"
    result = CliRunner().invoke(cli, ["snapshot", "--from-file", str(path), "-o", str(out)])
    assert not out.exists()  # nothing partial written
    assert not list(tmp_path.glob(".out.yaml.*"))
    return result.exit_code, result.output


def _snapshot_text(objects: list[dict[str, Any]], **header: str) -> str:
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"annotations": {
        "nodewright.io/snapshot-version": "1", "nodewright.io/snapshot-time": "2026-07-20T12:00:00Z",
        "nodewright.io/karpenter-version": "v1.15.1", ANN_OBJECTS: str(len(objects)), **header}}, "items": objects}
    return yaml.safe_dump(doc, sort_keys=False)


def test_another_karpenter_version_is_one_line_exit_2(tmp_path: Path) -> None:
    old = dict(nodepool(), apiVersion="karpenter.sh/v1beta1")
    code, out = _bad(tmp_path, _snapshot_text([old]))
    assert code == 2
    assert out.splitlines() == [
        f"error: {tmp_path}/bad.yaml#items[0]: NodePool 'general' is karpenter.sh/v1beta1: an object of Karpenter "
        "before v1.0; this nodewright reads Karpenter's v1 API (Karpenter >= 1.0, v1.15.1); upgrade Karpenter, or "
        "`nodewright convert` the manifests"]
    code, out = _bad(tmp_path, _snapshot_text([nodepool()], **{"nodewright.io/karpenter-version": "v0.37.0"}))
    assert (code, out.splitlines()) == (2, [
        f"error: {tmp_path}/bad.yaml: taken from Karpenter v0.37.0; this nodewright reads Karpenter's v1 API "
        "(>= v1.0, v1.15.1): upgrade Karpenter and snapshot again"])
    code, out = _bad(tmp_path, _snapshot_text([nodepool()], **{"nodewright.io/snapshot-version": "2"}))
    assert (code, out.splitlines()) == (2, [f"error: {tmp_path}/bad.yaml: snapshot version '2'; this nodewright "
                                            "reads version '1'"])


def test_unknown_kinds_and_fields_one_line_each(tmp_path: Path) -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "data": {}}
    odd_node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {}, "extra": 1}
    bad_pool = nodepool()
    bad_pool["spec"]["template"]["spec"]["colour"] = "blue"
    code, out = _bad(tmp_path, _snapshot_text([svc, secret, odd_node, bad_pool]))
    assert code == 2
    lines = out.splitlines()
    assert lines[:3] == [
        f"error: {tmp_path}/bad.yaml#items[0]: unknown kind 'Service' (v1); a snapshot holds CSINode, CapacityBuffer, "
        "DaemonSet, Deployment, EC2NodeClass, LimitRange, Namespace, Node, NodeClaim, NodeOverlay, NodePool, "
        "PersistentVolume, PersistentVolumeClaim, Pod, PodDisruptionBudget, PodTemplate, ReplicaSet, RuntimeClass, "
        "StatefulSet, StorageClass",
        f"error: {tmp_path}/bad.yaml#items[1]: Secret 'token': snapshots never hold Secrets or ConfigMaps; remove it",
        f"error: {tmp_path}/bad.yaml#items[2].extra: unknown field of Node 'n'",
    ]
    assert len(lines) == 4 and lines[3].startswith(f"error: {tmp_path}/bad.yaml#items[3].spec.template.spec.colour")
    assert lines[3].endswith("(in NodePool 'general')")


def test_truncated_files_are_refused(tmp_path: Path) -> None:
    full = _snapshot_text(cluster())
    # Cut at a line boundary: still valid YAML, but fewer items than the header says.
    cut = "\n".join(full.splitlines()[: len(full.splitlines()) // 2]) + "\n"
    code, out = _bad(tmp_path, cut)
    assert code == 2 and len(out.splitlines()) == 1 and "the file is truncated" in out
    write_snapshot(tmp_path / "s.json", cluster(), time=NOW)
    code, out = _bad(tmp_path, (tmp_path / "s.json").read_text()[:5000], "cut.json")
    assert code == 2
    assert out.splitlines() == [f"error: {tmp_path}/cut.json: not valid JSON at line 1 column 5001: Unterminated "
                                "string starting at (truncated or corrupted?)"] or "not valid JSON" in out


def test_unreachable_cluster_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    out = tmp_path / "snap.yaml"
    result = run("snapshot", "--kubeconfig", str(kubeconfig), "-o", str(out), "--timeout", "2")
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines == ["error: --kubeconfig: cannot reach the API server http://127.0.0.1:9: Failed to establish a "
                     "new connection: [Errno 111] Connection refused"]
    assert not out.exists() and list(tmp_path.iterdir()) == [kubeconfig]  # no temporary file left either
    missing = tmp_path / "nope"
    result = run("snapshot", "--kubeconfig", str(missing), "-o", str(out))
    assert (result.exit_code, result.output.splitlines()) == (2, [f"error: --kubeconfig: kubeconfig file {str(missing)!r} not found"])


class FakeRest:
    """Pages of 2 items per resource; 404 for NodeOverlays; ``forbid``: a plural answered 403."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]], forbid: str = "") -> None:
        self.objects, self.forbid, self.calls = objects, forbid, []

    def request(self, method: str, path: str, query: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((method, path, query.get("continue")))
        plural = path.rsplit("/", 1)[1]
        if plural == "nodeoverlays":
            raise NotFoundError("404")
        if plural == self.forbid:
            raise KubeError(f"HTTP 403 Forbidden: {plural} is forbidden", status=403)
        items = self.objects.get(plural, [])
        start = int(query.get("continue") or 0)
        more = start + 2 < len(items)
        return {"items": items[start:start + 2], "metadata": {"continue": str(start + 2) if more else ""}}


def test_collect_pages_with_list_only_and_sets_kind() -> None:
    pods = [{"metadata": {"name": f"p{i}", "namespace": "default", "managedFields": [{}]}} for i in range(5)]
    rest = FakeRest({"pods": pods})
    objects = collect(rest)
    assert [o["metadata"]["name"] for o in objects] == ["p0", "p1", "p2", "p3", "p4"]
    assert all(o["kind"] == "Pod" and o["apiVersion"] == "v1" and "managedFields" not in o["metadata"]
               for o in objects)
    assert {m for m, _, _ in rest.calls} == {"GET"}
    assert [c for c in rest.calls if c[1] == "/api/v1/pods"] == [
        ("GET", "/api/v1/pods", None), ("GET", "/api/v1/pods", "2"), ("GET", "/api/v1/pods", "4")]
    assert not any("secrets" in p or "configmaps" in p for _, p, _ in rest.calls)


def test_collect_reads_capacitybuffers_and_only_the_objects_they_name() -> None:
    """A buffer's PodTemplate / apps scalableRef are kept, no other (a cluster's ReplicaSets are many); without a
    buffer none of those kinds is listed; the file round-trips and redaction keeps the references matching."""
    buffer = {"metadata": {"name": "headroom", "namespace": "team"},
              "spec": {"podTemplateRef": {"name": "web"}, "replicas": 2}}
    scaled = {"metadata": {"name": "api-headroom", "namespace": "team"},
              "spec": {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "api"}, "percentage": 10}}
    template = {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
        {"name": "c", "image": "registry/web:1", "resources": {"requests": {"cpu": "1"}}}]}}}
    deployment = {"spec": {"replicas": 10, "selector": {"matchLabels": {"app": "api"}}, "template": {
        "metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "c", "image": "registry/api:2"}]}}}}
    rest = FakeRest({
        "capacitybuffers": [buffer, scaled],
        "podtemplates": [{"metadata": {"name": n, "namespace": ns}, **template}
                         for ns, n in (("team", "web"), ("team", "other"), ("default", "web"))],
        "deployments": [{"metadata": {"name": n, "namespace": "team"}, **deployment} for n in ("api", "web", "x")],
        "replicasets": [{"metadata": {"name": "api-5d8f", "namespace": "team"}}]})
    objects = collect(rest)
    assert [(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects] == [
        ("CapacityBuffer", "team", "headroom"), ("CapacityBuffer", "team", "api-headroom"),
        ("PodTemplate", "team", "web"), ("Deployment", "team", "api")]
    listed = {p.rsplit("/", 1)[1] for _, p, _ in rest.calls}
    assert {"capacitybuffers", "podtemplates", "deployments"} <= listed
    assert not listed & {"statefulsets", "replicasets"}  # no buffer names one
    quiet = FakeRest({"podtemplates": rest.objects["podtemplates"]})
    assert [o["kind"] for o in collect(quiet)] == []
    assert not {p.rsplit("/", 1)[1] for _, p, _ in quiet.calls} & {"podtemplates", "deployments", "statefulsets",
                                                                   "replicasets"}
    shared = redact(objects)
    assert shared[0]["spec"]["podTemplateRef"]["name"] == shared[2]["metadata"]["name"] == stable_hash("web")
    assert shared[1]["spec"]["scalableRef"] == {"apiGroup": "apps", "kind": "Deployment", "name": stable_hash("api")}
    assert "image" not in shared[3]["spec"]["template"]["spec"]["containers"][0]


def test_collect_refused_list_names_the_clusterrole() -> None:
    with pytest.raises(NodewrightValidationError) as err:
        collect(FakeRest({}, forbid="nodeclaims"))
    assert str(err.value).startswith("--kubeconfig: list nodeclaims.karpenter.sh is forbidden: bind the ClusterRole "
                                     "of docs/whatif.md")


def test_clusterrole_is_list_only_on_every_snapshot_kind_and_documented() -> None:
    role = cluster_role()
    granted = {(g, res) for rule in role["rules"] for g in rule["apiGroups"] for res in rule["resources"]}
    assert granted == {(k.group, k.plural) for k in SNAPSHOT_KINDS}
    assert all(rule["verbs"] == ["list"] for rule in role["rules"])
    assert not any(res in ("secrets", "configmaps") for _, res in granted)
    docs = (Path(__file__).parents[3] / "docs" / "whatif.md").read_text()
    assert yaml.safe_dump(role, sort_keys=False) in docs
    assert (Path(__file__).parents[3] / "examples" / "whatif" / "clusterrole.yaml").read_text() == \
        yaml.safe_dump(role, sort_keys=False)


def test_unwritable_output_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(NodewrightValidationError, match="no such directory"):
        write_snapshot(tmp_path / "missing" / "s.yaml", cluster(), time=NOW)


def test_kube_error_transport_maps_to_cannot_reach() -> None:
    class Down:
        def request(self, *a: Any) -> dict[str, Any]:
            raise KubeError("GET /apis/karpenter.sh/v1/nodepools: MaxRetryError: refused")

    with pytest.raises(NodewrightValidationError, match="cannot reach the API server"):
        collect(Down())


def test_the_same_object_twice_is_read_once_and_different_copies_are_refused(tmp_path: Path) -> None:
    pool = nodepool()
    path = tmp_path / "twice.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [pool, pool]}))
    assert len(read_snapshot(path).objects) == 1
    other = nodepool(budget="1")
    code, out = _bad(tmp_path, yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [pool, other]}))
    assert (code, out.splitlines()) == (2, [f"error: {tmp_path}/bad.yaml#items[1]: NodePool 'general' appears twice "
                                            f"with different contents (also {tmp_path}/bad.yaml#items[0])"])


def test_snapshot_redact_from_the_cli(tmp_path: Path, snapshot_file: Path) -> None:
    out = tmp_path / "shared.yaml"
    result = run("snapshot", "--from-file", str(snapshot_file), "--redact", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"wrote {out}: 23 objects (1 NodePool, 1 EC2NodeClass, 4 NodeClaims, 4 Nodes, 9 Pods, 1 DaemonSet, "
        "1 PodDisruptionBudget, 2 Namespaces); names and labels redacted"]
    snap = read_snapshot(out)
    assert snap.redacted and snap.time == NOW
    assert "ip-10-0-1-1" not in out.read_text()


def test_unknown_workload_fields_are_one_warning_per_kind_and_field(tmp_path: Path) -> None:
    """A Pod field no Kubernetes v1.36 object has (a newer API server's, or an edit) is ignored by the dry run: one
    warning per kind and field naming the first object and how many more, on ``simulate --snapshot``, ``explain``
    and ``diff``; the shipped snapshots have none (an API server serves valid fields only)."""
    objects = cluster()
    pods = [o for o in objects if o["kind"] == "Pod"]
    for p in pods:
        p["spec"]["containers"][0]["resource"] = {}
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    ds["spec"]["template"]["spec"]["nodeSelecter"] = {"a": "b"}
    path = tmp_path / "snap.yaml"
    write_snapshot(path, objects, time=NOW)
    first = next(i for i, o in enumerate(read_snapshot(path).objects) if o["kind"] == "Pod")
    expected = [
        f"warning: {path}#items[{first}].spec.containers[0].resource: unknown field: simulate ignores it (not a "
        f"Kubernetes v1.36 field: a newer API server's, or the file was edited); did you mean 'resources'? (in Pod "
        f"{read_snapshot(path).objects[first]['metadata']['name']!r}); {len(pods) - 1} more Pod object(s) have it",
    ]
    out = run("simulate", "--snapshot", str(path))
    assert out.exit_code == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("warning: ")]
    assert lines[0] == expected[0]
    assert lines[1].endswith("spec.template.spec.nodeSelecter: unknown field: simulate ignores it (not a Kubernetes "
                             "v1.36 field: a newer API server's, or the file was edited); did you mean "
                             f"'nodeSelector'? (in DaemonSet {ds['metadata']['name']!r})") and len(lines) == 2
    assert run("explain", "nodepool", "general", "--snapshot", str(path)).stderr.splitlines()[:2] == lines
    base = tmp_path / "base"
    base.mkdir()
    (base / "np.yaml").write_text(yaml.safe_dump(nodepool()))
    assert [line for line in run("diff", "--base", str(base), "--head", str(base), "--snapshot", str(path))
            .stderr.splitlines() if line.startswith("warning: ")][:2] == lines
    for shipped in ("examples/snapshots/viewer-demo.yaml", "examples/whatif/snapshot.yaml"):
        assert read_snapshot(Path(__file__).parents[3] / shipped).findings == ()
