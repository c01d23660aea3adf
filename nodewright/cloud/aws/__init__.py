"""nodewright.cloud.aws: the AWS cloud provider (boto3), one module per AWS concept.

Entry point: :class:`nodewright.cloud.aws.provider.AWSCloudProvider` (implements
:class:`nodewright.cloud.provider.CloudProvider`). See ``docs/aws.md`` for the
modules, their AWS calls and refresh policies.
"""
