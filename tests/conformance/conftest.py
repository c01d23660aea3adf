"""The conformance suite: Karpenter's scheduling tests, ported in our own words (see README.md).

Every test drives :func:`tests.conformance.kit.run` (``nodewright simulate -f`` as a function); the builders and
the one call to the entry point live in ``kit.py``.
"""
