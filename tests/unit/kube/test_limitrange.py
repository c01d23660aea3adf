"""LimitRanger defaulting (kube ``plugin/pkg/admission/limitranger``)."""

from __future__ import annotations

from nodewright.kube.limitrange import apply_limit_ranges, for_namespace


def _lr(namespace: str, **item: dict[str, str]) -> dict:
    return {"kind": "LimitRange", "metadata": {"name": "lr", "namespace": namespace},
            "spec": {"limits": [{"type": "Container", **item}, {"type": "Pod", "max": {"cpu": "64"}}]}}


def test_defaults_fill_only_what_is_missing_in_containers_and_init_containers() -> None:
    spec = {"containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"name": "i", "resources": {"limits": {"memory": "1Gi"}}}]}
    out = apply_limit_ranges(spec, [_lr("default", default={"cpu": "2", "memory": "512Mi"},
                                        defaultRequest={"cpu": "500m"})])
    assert out["containers"][0]["resources"] == {"limits": {"cpu": "2", "memory": "512Mi"},
                                                 "requests": {"cpu": "500m", "memory": "512Mi"}}
    assert out["containers"][1]["resources"]["requests"] == {"cpu": "1", "memory": "512Mi"}
    # A container's own limit is its request (API defaulting), not the LimitRange's default request.
    assert out["initContainers"][0]["resources"] == {"limits": {"cpu": "2", "memory": "1Gi"},
                                                     "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert spec["containers"][0] == {"name": "a"}  # the input is not changed


def test_max_stands_in_for_a_missing_default_and_pod_items_are_ignored() -> None:
    out = apply_limit_ranges({"containers": [{"name": "a"}]}, [_lr("default", max={"cpu": "4"})])
    assert out["containers"][0]["resources"] == {"limits": {"cpu": "4"}, "requests": {"cpu": "4"}}


def test_first_limit_range_wins_and_namespaces_are_separate() -> None:
    ranges = [_lr("team", defaultRequest={"cpu": "1"}), _lr("team", defaultRequest={"cpu": "3"}),
              _lr("other", defaultRequest={"cpu": "9"})]
    out = apply_limit_ranges({"containers": [{"name": "a"}]}, for_namespace(ranges, "team"))
    assert out["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    assert apply_limit_ranges({"containers": [{"name": "a"}]}, []) == {"containers": [{"name": "a"}]}
