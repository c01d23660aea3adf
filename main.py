#!/usr/bin/env python
"""Synthesize nodewright's infrastructure: ``python main.py`` → ``cdktf.out/stacks/<stack>/cdk.tf.json``.

Settings come from ``cdktf.json`` (``context.nodewright``) and ``NODEWRIGHT_INFRA_*`` environment
variables (see ``stacks/settings.py``). Invalid settings print one line and exit 2. No AWS access
is needed to synthesize; ``cdktn deploy`` (or ``terraform apply`` per stack) needs credentials.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# jsii prints a multi-line banner on every start under Node 20; it is noise here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from nodewright.errors import NodewrightValidationError  # noqa: E402
from stacks.settings import CONTEXT_KEY, load_settings  # noqa: E402

PROJECT_FILE = Path(__file__).resolve().parent / "cdktf.json"


def read_project(path: Path = PROJECT_FILE) -> dict[str, Any]:
    """The parsed ``cdktf.json``.

    Raises:
        NodewrightValidationError: the file is missing or not a JSON object.
    """
    try:
        project = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise NodewrightValidationError(str(path), f"cannot read project file: {err}") from None
    if not isinstance(project, dict):
        raise NodewrightValidationError(str(path), "must contain a JSON object")
    return project


def main() -> int:
    started = time.perf_counter()
    try:
        project = read_project()
        settings = load_settings((project.get("context") or {}).get(CONTEXT_KEY), os.environ)
        # Imported after validation: loading the providers costs seconds, bad input should not.
        from cdktn import App

        from stacks.app import app_context, build_stacks

        context = app_context({"targetVersions": project.get("targetVersions")} if "targetVersions" in project
                              else None)
        app = App(context=context)
        build_stacks(app, settings)
        app.synth()
    except NodewrightValidationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"synthesized {settings.cluster_name} ({settings.identity_mode.value}) into "
          f"{os.environ.get('CDKTF_OUTDIR', 'cdktf.out')}/stacks in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
