"""The "Done when" run: one NodeClaim launched and terminated through real HTTP against moto's server on
127.0.0.1 (``scripts/launch_nodeclaim_moto.py``), plus the PassRole sentence."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from moto.server import ThreadedMotoServer

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "launch_nodeclaim_moto.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("launch_nodeclaim_moto", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.integration
def test_launch_and_terminate_over_http(aws_env: None) -> None:
    script = _script()
    port = script.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        result = script.run(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
    assert result["instance_type"] == "t3.large"  # cheapest candidate: bundled $0.0832/h (no Pricing API in moto)
    assert result["pricing_fallback"] is True
    assert result["subnet_ok"] and result["ami_ok"]
    assert result["tags"] == script.EXPECTED_TAGS
    assert result["profile_roles"] == ["KarpenterNodeRole-demo"]
    assert result["state_after_delete"] == "terminated"
    assert result["second_delete"] == "NodeClaimNotFoundError"
    assert len(result["launch_templates"]) == 3  # max pods 35 (t3.large), 29 (m5.large), 58 (t3/m5.xlarge)
    assert result["passrole_message"] == (
        "the controller role arn:aws:iam::111122223333:role/KarpenterControllerRole-demo may not iam:PassRole on "
        "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo: add iam:PassRole for that role with condition "
        "iam:PassedToService=ec2.amazonaws.com")
