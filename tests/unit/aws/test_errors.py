"""AWS denials become one actionable sentence; other errors stay retryable."""

from __future__ import annotations

from botocore.exceptions import ClientError

from nodewright.cloud.aws.errors import authorization_error, role_arn_of, translate
from nodewright.cloud.provider import AuthorizationError, LaunchError

PASSROLE_MESSAGE = (
    "User: arn:aws:sts::111122223333:assumed-role/nodewright-controller/1732965000123456789 is not authorized "
    "to perform: iam:PassRole on resource: arn:aws:iam::111122223333:role/KarpenterNodeRole-demo because no "
    "identity-based policy allows the iam:PassRole action"
)


def _client_error(code: str, message: str, operation: str = "CreateFleet") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


def test_passrole_denial_is_one_sentence_naming_role_action_resource_and_fix() -> None:
    err = translate(_client_error("AccessDenied", PASSROLE_MESSAGE, "AddRoleToInstanceProfile"),
                    operation="iam:AddRoleToInstanceProfile")
    assert isinstance(err, AuthorizationError) and not err.retryable
    assert str(err) == (
        "the controller role arn:aws:iam::111122223333:role/nodewright-controller may not iam:PassRole on "
        "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo: add iam:PassRole for that role with condition "
        "iam:PassedToService=ec2.amazonaws.com")
    assert (err.action, err.resource) == ("iam:PassRole", "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo")
    assert err.principal == "arn:aws:iam::111122223333:role/nodewright-controller"


def test_ec2_unauthorized_operation_with_user_clause() -> None:
    message = ("You are not authorized to perform this operation. User: arn:aws:sts::111122223333:assumed-role/"
               "nodewright-controller/abc is not authorized to perform: ec2:RunInstances on resource: "
               "arn:aws:ec2:us-east-1:111122223333:instance/*. Encoded authorization failure message: AbCd")
    err = authorization_error("UnauthorizedOperation", message, operation="ec2:CreateFleet")
    assert str(err) == ("the controller role arn:aws:iam::111122223333:role/nodewright-controller may not "
                        "ec2:RunInstances on arn:aws:ec2:us-east-1:111122223333:instance/*: add ec2:RunInstances "
                        "on that resource to the controller role's policy")


def test_encoded_only_denial_falls_back_to_operation_and_known_principal() -> None:
    err = translate(_client_error("UnauthorizedOperation", "You are not authorized to perform this operation. "
                                  "Encoded authorization failure message: xyz"),
                    operation="ec2:CreateLaunchTemplate", principal="arn:aws:iam::1:role/ctl")
    assert str(err) == ("the controller role arn:aws:iam::1:role/ctl may not ec2:CreateLaunchTemplate: "
                        "add ec2:CreateLaunchTemplate to the controller role's policy")


def test_role_arn_of_keeps_non_sts_arns() -> None:
    assert role_arn_of("arn:aws-cn:sts::123:assumed-role/r/s") == "arn:aws-cn:iam::123:role/r"
    assert role_arn_of("arn:aws:iam::123:user/alice") == "arn:aws:iam::123:user/alice"


def test_other_errors_are_retryable_launch_errors_with_code() -> None:
    err = translate(_client_error("RequestLimitExceeded", "Request limit exceeded."), operation="ec2:CreateFleet")
    assert isinstance(err, LaunchError) and err.retryable
    assert str(err) == "ec2:CreateFleet failed: RequestLimitExceeded: Request limit exceeded."


def test_clients_use_adaptive_retries_and_timeouts() -> None:
    from nodewright.cloud.aws.clients import ClientSettings

    config = ClientSettings("ap-northeast-2").botocore_config()
    assert config.retries == {"mode": "adaptive", "max_attempts": 8}
    assert (config.connect_timeout, config.read_timeout, config.region_name) == (5.0, 30.0, "ap-northeast-2")
