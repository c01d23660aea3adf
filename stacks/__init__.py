"""CDK Terrain stacks of nodewright's infrastructure, one module per concern.

``network``, ``cluster``, ``identity``, ``interruption``, ``addons`` and ``workloads`` each build a
Terraform stack; ``settings`` holds the one typed settings object, ``policies`` the IAM, KMS and
SQS documents as pure functions, ``app`` assembles the stacks. ``main.py`` is the entry point.
"""
