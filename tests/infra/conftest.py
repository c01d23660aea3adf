"""Fixtures of the infrastructure tests: a synthesized app, once per test module.

Each synthesis costs seconds (loading the AWS provider bindings through jsii), so modules share
one app per configuration; tests only read the results.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# The stacks package sits at the repository root beside main.py (cdktf's layout), not in the
# installed nodewright package.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

_REMOTE_REF = re.compile(
    r"^\$\{data\.terraform_remote_state\.cross-stack-reference-input-(?P<stack>[a-z]+)\.outputs\.(?P<output>[^}]+)\}$")


@dataclass
class Synth:
    """One synthesized app.

    Attributes:
        settings: the settings it was built from.
        stacks: the ``stacks.app.Stacks`` constructs.
        text: ``Testing.synth(stack)`` output per stack name (for ``Testing`` matchers).
        docs: the same, parsed.
        outdir: where ``app.synth()`` wrote ``stacks/<name>/cdk.tf.json`` and ``manifest.json``.
    """

    settings: Any
    stacks: Any
    outdir: Path
    text: dict[str, str] = field(default_factory=dict)
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def resources(self, stack: str, resource_type: str) -> dict[str, dict[str, Any]]:
        """``{logical name: config}`` of one resource type in one stack."""
        return self.docs[stack].get("resource", {}).get(resource_type, {})

    def resource(self, stack: str, resource_type: str, name: str) -> dict[str, Any]:
        return self.resources(stack, resource_type)[name]

    def resolve(self, value: str) -> tuple[str, str]:
        """Follow a cross-stack reference to the producing stack's expression.

        ``"${data.terraform_remote_state.cross-stack-reference-input-identity.outputs.X}"`` becomes
        ``("identity", "${aws_iam_role.controller_role.arn}")``.

        Raises:
            AssertionError: ``value`` is not a cross-stack reference or its output is missing.
        """
        match = _REMOTE_REF.match(value)
        assert match, f"{value!r} is not a cross-stack reference"
        stack, output = match.group("stack"), match.group("output")
        outputs = self.docs[stack].get("output", {})
        assert output in outputs, f"stack {stack} has no output {output}"
        return stack, outputs[output]["value"]


def synthesize(tmp_dir: Path, context: dict[str, Any] | None = None,
               environ: dict[str, str] | None = None) -> Synth:
    """Build the app from settings (``context`` as in cdktf.json, ``environ`` as env vars) and
    synthesize every stack into ``tmp_dir``."""
    from cdktn import Testing

    from stacks.app import STACK_NAMES, app_context, build_stacks
    from stacks.settings import load_settings

    settings = load_settings(context, environ or {})
    app = Testing.app(outdir=str(tmp_dir), context=app_context(), stack_traces=False)
    stacks = build_stacks(app, settings)
    app.synth()  # resolves cross-stack references; Testing.synth alone does not
    result = Synth(settings=settings, stacks=stacks, outdir=tmp_dir)
    for name in STACK_NAMES:
        result.text[name] = Testing.synth(getattr(stacks, name))
        result.docs[name] = json.loads(result.text[name])
    return result


def policy_of(config: dict[str, Any], attribute: str = "policy") -> dict[str, Any]:
    """A policy document stored as a JSON string in a resource attribute."""
    return json.loads(config[attribute])


def statement(document: dict[str, Any], sid: str) -> dict[str, Any]:
    matches = [s for s in document["Statement"] if s.get("Sid") == sid]
    assert len(matches) == 1, f"expected one statement {sid}, found {len(matches)}"
    return matches[0]
