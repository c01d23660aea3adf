"""moto's ``ThreadedMotoServer`` on 127.0.0.1 as the EC2/SSM/IAM/SQS endpoint, seeded like an EKS account.

The server runs in this process, so the seed writes EKS AMI alias parameters (under the reserved
``/aws/service/`` prefix that PutParameter refuses) straight into moto's SSM backend. The Pricing API is not
in moto: the controller gets a ``botocore`` Stubber-backed pricing client answering live on-demand prices.
``POST /moto-api/reset`` empties every backend between tests.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.stub import Stubber
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import instance_types as moto_instance_types
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

from nodewright.cloud.aws.clients import AWSClients, ClientSettings

REGION = "us-east-1"
CLUSTER = "demo"
K8S_VERSION = "1.31"
QUEUE = "nodewright-demo"
SERVICE_CIDR = "10.100.0.0/16"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
               "AWS_DEFAULT_REGION": REGION}
AL2023_PARAMETERS = {
    "x86_64": f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023/x86_64/standard/recommended/image_id",
    "arm64": f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023/arm64/standard/recommended/image_id",
}
#: On-demand prices (USD/hour) the stubbed Pricing API answers; c5.large is the cheapest candidate.
LIVE_PRICES = {"m5.large": 0.096, "m5.xlarge": 0.192, "c5.large": 0.085, "c5.xlarge": 0.17, "t3.large": 0.0832}


#: The instance types this account offers. moto serves its whole catalog (~1,300 types, 7 pages per call),
#: which costs ~10 s per controller start on a busy core; a small account keeps each test under a second.
OFFERED_TYPES = frozenset({"c5.large", "c5.xlarge", "m5.large", "m5.xlarge", "t3.large", "m6g.large"})


class MotoServer:
    """One ``ThreadedMotoServer`` on 127.0.0.1 (free port) shared by the integration tests."""

    def __init__(self) -> None:
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.url = ""
        self.amis: dict[str, str] = {}

    def start(self) -> MotoServer:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per AWS call otherwise
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self.server.stop()

    def reset(self) -> None:
        """Empty every moto backend."""
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


@contextlib.contextmanager
def offering_only(types: frozenset[str] = OFFERED_TYPES) -> Iterator[None]:
    """Make moto (in this process) offer only ``types`` in :data:`REGION` for the duration; restores its global
    catalog afterwards, so other suites using moto see the full catalog."""
    backend = moto_instance_types.InstanceTypeBackend
    saved_types = backend.instance_types
    saved_offerings = {location: by_region[REGION]
                       for location, by_region in moto_instance_types.INSTANCE_TYPE_OFFERINGS.items()
                       if REGION in by_region}
    backend.instance_types = [t for t in saved_types if t["InstanceType"] in types]
    for location, offerings in saved_offerings.items():
        moto_instance_types.INSTANCE_TYPE_OFFERINGS[location][REGION] = [
            o for o in offerings if o.get("InstanceType") in types]
    try:
        yield
    finally:
        backend.instance_types = saved_types
        for location, offerings in saved_offerings.items():
            moto_instance_types.INSTANCE_TYPE_OFFERINGS[location][REGION] = offerings


def _put_public_parameter(name: str, value: str) -> None:
    backend = ssm_backends[DEFAULT_ACCOUNT_ID][REGION]
    versions = backend._parameters[name]
    versions.append(Parameter(account_id=DEFAULT_ACCOUNT_ID, name=name, value=value, parameter_type="String",
                              description=None, allowed_pattern=None, keyid=None,
                              last_modified_date=dt.datetime.now(dt.UTC), version=len(versions) + 1,
                              data_type="aws:ec2:image"))


@dataclass
class Account:
    """What :func:`seed` created in moto.

    Attributes:
        url: the moto endpoint.
        subnets: zone -> subnet id (tagged ``karpenter.sh/discovery=demo``).
        security_group: the tagged security group id.
        amis: architecture -> AMI id behind the AL2023 alias parameters.
        queue_url: the interruption queue.
        fleet_requests: every ``CreateFleet`` request the controller's clients sent (parameters as sent).
    """

    url: str
    subnets: dict[str, str]
    security_group: str
    amis: dict[str, str]
    queue_url: str
    fleet_requests: list[dict[str, Any]] = field(default_factory=list)

    def client(self, service: str) -> Any:
        """A boto3 client for the test itself against moto."""
        return _client(service, self.url)

    def instances(self) -> list[dict[str, Any]]:
        """Every instance moto knows, with its state."""
        reservations = self.client("ec2").describe_instances()["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def controller_clients(self) -> AWSClients:
        """Clients for one controller replica: moto endpoint, few retries, stubbed Pricing, CreateFleet recorded.

        The boto3 clients are shared by every replica of the session (thread-safe, and creating them costs more
        CPU than a whole flow); each call queues one more Pricing answer and points the CreateFleet recorder at
        this account.
        """
        shared = _controller_clients(self.url)
        _FLEET_SINK[:] = [self.fleet_requests]
        _PRICING[0].add_response("get_products", {
            "PriceList": [_price_entry(t, p) for t, p in sorted(LIVE_PRICES.items())], "FormatVersion": "aws_v1"})
        return AWSClients(shared.settings, session=_session(), overrides=dict(shared._clients))


#: Where the shared ec2 client's CreateFleet hook records (the current test's ``Account.fleet_requests``).
_FLEET_SINK: list[list[dict[str, Any]]] = []
_PRICING: list[Stubber] = []
_SHARED: dict[str, AWSClients] = {}


def _record_fleet(params: dict[str, Any], **_: Any) -> None:
    if _FLEET_SINK:
        _FLEET_SINK[0].append(json.loads(json.dumps(params, default=str)))


def _controller_clients(url: str) -> AWSClients:
    if url not in _SHARED:
        pricing = _session().client("pricing", region_name="us-east-1")  # type: ignore[call-overload]
        stubber = Stubber(pricing)
        stubber.activate()
        _PRICING[:] = [stubber]
        clients = AWSClients(ClientSettings(REGION, endpoint_url=url, max_attempts=2, connect_timeout=2,
                                            read_timeout=10), session=_session(), overrides={"pricing": pricing})
        for service in ("ec2", "ssm", "iam", "sqs", "sts", "eks"):  # eagerly, here: sessions are not thread-safe
            getattr(clients, service)
        clients.ec2.meta.events.register("provide-client-params.ec2.CreateFleet", _record_fleet)
        _SHARED[url] = clients
    return _SHARED[url]


_SESSION: list[boto3.session.Session] = []


def _session() -> boto3.session.Session:
    """One boto3 session for every test: it caches the service models (loading EC2's takes ~0.5 s)."""
    if not _SESSION:
        _SESSION.append(boto3.session.Session())
    return _SESSION[0]


_CLIENTS: dict[tuple[str, str], Any] = {}


def _client(service: str, url: str) -> Any:
    """A cached client of the shared session (creating one costs 50-500 ms of CPU; they are thread-safe)."""
    key = (service, url)
    if key not in _CLIENTS:
        _CLIENTS[key] = _session().client(service, region_name=REGION, endpoint_url=url)  # type: ignore[call-overload]
    return _CLIENTS[key]


def _price_entry(instance_type: str, usd: float) -> str:
    return json.dumps({
        "product": {"productFamily": "Compute Instance",
                    "attributes": {"instanceType": instance_type, "regionCode": REGION, "operatingSystem": "Linux",
                                   "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}},
        "terms": {"OnDemand": {"SKU.A": {"priceDimensions": {"SKU.A.B": {
            "unit": "Hrs", "pricePerUnit": {"USD": f"{usd:.10f}"}}}}}},
    })


def seed(server: MotoServer, kubernetes_version: str = K8S_VERSION) -> Account:
    """A VPC with discovery-tagged subnets in three zones, a tagged security group, AL2023 alias parameters for
    ``kubernetes_version`` (the API server's ``major.minor``), the node role, the interruption queue and the EKS
    cluster."""
    url = server.url
    ec2 = _client("ec2", url)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    discovery = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
    subnets = {}
    for zone, cidr in (("us-east-1a", "10.0.0.0/24"), ("us-east-1b", "10.0.1.0/25"), ("us-east-1c", "10.0.2.0/26")):
        subnets[zone] = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=[
            {"ResourceType": "subnet", "Tags": discovery}])["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc, TagSpecifications=[
        {"ResourceType": "security-group", "Tags": discovery}])["GroupId"]
    if not server.amis:  # moto's default AMIs are the same after every reset: look them up once
        images = ec2.describe_images(Owners=["amazon"])["Images"]
        server.amis = {
            "x86_64": next(i["ImageId"] for i in images if i["Architecture"] == "x86_64"
                           and "Windows" not in i.get("Name", "")),
            "arm64": next(i["ImageId"] for i in images if i["Architecture"] == "arm64"),
        }
    amis = dict(server.amis)
    for arch, parameter in AL2023_PARAMETERS.items():
        _put_public_parameter(parameter.replace(f"/{K8S_VERSION}/", f"/{kubernetes_version}/"), amis[arch])
    _client("iam", url).create_role(
        RoleName="KarpenterNodeRole-demo", AssumeRolePolicyDocument="{}")
    queue_url = _client("sqs", url).create_queue(QueueName=QUEUE)["QueueUrl"]
    # The EKS cluster itself: the controller reads endpoint, CA and service CIDR from eks:DescribeCluster.
    _client("eks", url).create_cluster(
        name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks-cluster",
        resourcesVpcConfig={"subnetIds": sorted(subnets.values())},
        kubernetesNetworkConfig={"serviceIpv4Cidr": SERVICE_CIDR})
    return Account(url, subnets, group, amis, queue_url)


@contextlib.contextmanager
def fresh_account(server: MotoServer, setenv: Callable[[str, str], object],
                  kubernetes_version: str = K8S_VERSION) -> Iterator[Account]:
    """A reset and seeded moto account offering :data:`OFFERED_TYPES`, with fake credentials set through
    ``setenv`` (e.g. ``monkeypatch.setenv``) so nothing can reach real AWS."""
    for key, value in CREDENTIALS.items():
        setenv(key, value)
    server.reset()
    with offering_only():
        yield seed(server, kubernetes_version)
