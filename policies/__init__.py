"""nodewright's policy checks for checkov (ids ``CKV_NW_*``).

checkov loads every ``.py`` file of this directory with ``--external-checks-dir policies``; it needs
this ``__init__.py`` to do so. The ``nw_*`` modules without a checkov import hold the rules as pure
functions over plain data (tested directly, without checkov); ``nw_checkov_*.py`` wrap them as
checkov checks. See docs/policy-gate.md.
"""
