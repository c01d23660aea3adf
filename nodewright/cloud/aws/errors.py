"""Decoding AWS errors into nodewright's provider errors, with one actionable sentence each.

AWS reports a denied call as ``UnauthorizedOperation`` (EC2) or ``AccessDenied`` /
``AccessDeniedException`` (IAM, SSM, SQS, Pricing). When the message names the caller, the action and the
resource (``"User: <arn> is not authorized to perform: <action> on resource: <arn>"``, the shape IAM and
EC2 use), we rebuild it as one sentence that names the fix, e.g. the first field report's failure::

    the controller role arn:aws:iam::111122223333:role/nodewright may not iam:PassRole on
    arn:aws:iam::111122223333:role/nodes: add iam:PassRole for that role with condition
    iam:PassedToService=ec2.amazonaws.com
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from nodewright.cloud.provider import AuthorizationError, CloudProviderError, LaunchError, TransientCloudError

P = ParamSpec("P")
R = TypeVar("R")

AUTHORIZATION_CODES = frozenset(
    {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "AuthFailure", "UnauthorizedException"}
)
THROTTLING_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException",
     "RequestThrottled", "RequestThrottledException"}
)
NOT_FOUND_CODES = frozenset(
    {"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed", "InvalidLaunchTemplateName.NotFoundException",
     "InvalidLaunchTemplateId.NotFound", "NoSuchEntity", "ParameterNotFound", "InvalidAMIID.NotFound"}
)

# "User: arn:... is not authorized to perform: iam:PassRole on resource: arn:... because ..."
_DENIAL = re.compile(
    r"User: (?P<principal>\S+) is not authorized to perform: (?P<action>[\w-]+:[\w*-]+)"
    r"(?: on resource: (?P<resource>[^\s,]+?))?(?=[\s.,]|$)"
)
_ASSUMED_ROLE = re.compile(r"^arn:(?P<partition>[\w-]+):sts::(?P<account>\d+):assumed-role/(?P<role>[^/]+)/.*$")


def error_code(err: ClientError) -> str:
    """The AWS error code of a botocore ``ClientError`` (``""`` when absent)."""
    return str(err.response.get("Error", {}).get("Code", ""))


def error_message(err: ClientError) -> str:
    """The AWS error message of a botocore ``ClientError`` (``""`` when absent)."""
    return str(err.response.get("Error", {}).get("Message", ""))


def is_authorization_error(code: str) -> bool:
    """Whether ``code`` is an AWS denial (no retry helps until the policy changes)."""
    return code in AUTHORIZATION_CODES


def is_not_found_error(code: str) -> bool:
    """Whether ``code`` means the resource does not exist."""
    return code in NOT_FOUND_CODES or code.endswith(".NotFound") or code.endswith("NotFoundException")


def role_arn_of(principal: str) -> str:
    """The IAM role ARN behind an STS assumed-role ARN; any other ARN is returned unchanged.

    ``arn:aws:sts::111122223333:assumed-role/nodewright/botocore-session-1`` ->
    ``arn:aws:iam::111122223333:role/nodewright`` (a role path, which the STS ARN drops, is not restored).
    """
    match = _ASSUMED_ROLE.match(principal)
    if not match:
        return principal
    return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"


def authorization_sentence(action: str, resource: str, principal: str) -> str:
    """One sentence naming who may not do what on which resource, and the policy change that fixes it."""
    who = f"the controller role {principal}" if principal else "the controller role"
    on = f" on {resource}" if resource and resource != "*" else ""
    if action == "iam:PassRole":
        target = "that role" if on else "the node role"
        return (f"{who} may not iam:PassRole{on}: add iam:PassRole for {target} with condition "
                "iam:PassedToService=ec2.amazonaws.com")
    scope = " on that resource" if on else ""
    return f"{who} may not {action}{on}: add {action}{scope} to the controller role's policy"


def authorization_error(code: str, message: str, *, operation: str, principal: str = "") -> AuthorizationError:
    """Build an :class:`AuthorizationError` from an AWS denial.

    Args:
        code: the AWS error code (``UnauthorizedOperation``, ``AccessDenied``...).
        message: the AWS error message; parsed for principal, action and resource when present.
        operation: ``"<service>:<Operation>"`` that was called, e.g. ``"ec2:CreateFleet"``; the action when
            the message names none (EC2 often only returns an encoded message).
        principal: the controller's own ARN if known (from STS), used when the message names no principal.
    """
    match = _DENIAL.search(message)
    action = match["action"] if match else operation
    resource = (match["resource"] or "") if match else ""
    caller = role_arn_of(match["principal"]) if match else principal
    sentence = authorization_sentence(action, resource, caller)
    return AuthorizationError(sentence, action=action, resource=resource, principal=caller, code=code)


def translate(err: ClientError, *, operation: str, principal: str = "") -> CloudProviderError:
    """Map a botocore ``ClientError`` from ``operation`` onto a provider error.

    Denials become :class:`AuthorizationError` (not retryable); everything else a retryable
    :class:`LaunchError` whose message reads ``"<operation> failed: <Code>: <Message>"``.
    """
    code = error_code(err)
    if is_authorization_error(code):
        return authorization_error(code, error_message(err), operation=operation, principal=principal)
    failure = LaunchError(f"{operation} failed: {code}: {error_message(err)}")
    return failure


#: What botocore raises when no usable AWS answer arrived (``ResponseParserError`` is not a ``BotoCoreError``).
TRANSPORT_ERRORS = (BotoCoreError, ResponseParserError)


def translate_botocore(err: Exception, *, operation: str) -> TransientCloudError:
    """A botocore error that is not an AWS answer (``ReadTimeoutError``, ``ConnectTimeoutError``,
    ``EndpointConnectionError``/``ConnectionClosedError``, ``ResponseParserError`` for a 5xx body it cannot parse,
    a retry quota spent) as a retryable provider error: ``"<operation> failed: <ErrorClass>: <text>"``."""
    return TransientCloudError(f"{operation} failed: {type(err).__name__}: {err}")


def botocore_errors(operation: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a CloudProvider method so botocore's non-``ClientError`` failures leave it as
    :class:`TransientCloudError` (the controllers' retry-with-backoff path), never as a traceback."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except TRANSPORT_ERRORS as err:
                raise translate_botocore(err, operation=operation) from err

        return call

    return wrap
