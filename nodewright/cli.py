"""The ``nodewright`` command line: ``run``, ``simulate``, ``convert``, ``crds``.

Each subcommand is a thin wrapper over the module that owns the behaviour; invalid user input
(:class:`nodewright.errors.NodewrightValidationError`) is printed on one line and exits 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from nodewright.errors import NodewrightValidationError


def exit_on_invalid_input(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a :class:`NodewrightValidationError` into one line on stderr and exit code 2."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except NodewrightValidationError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nodewright")
def cli() -> None:
    """nodewright: a Karpenter-compatible node autoscaler for Amazon EKS."""


# Subcommands are added below, one per owning module (see docs/architecture.md).


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
