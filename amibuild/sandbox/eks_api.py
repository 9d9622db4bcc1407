"""The emulator's EKS access entries and node group version updates, which moto 5.2.5 lacks (HTTP 404).

Access entries: CreateAccessEntry, DescribeAccessEntry, ListAccessEntries, UpdateAccessEntry,
DeleteAccessEntry, AssociateAccessPolicy, ListAssociatedAccessPolicies, DisassociateAccessPolicy,
on moto's clusters, with EKS's rules and error codes. Node groups: UpdateNodegroupVersion,
DescribeUpdate and ListUpdates. An update starts `InProgress` (the node group `UPDATING`) and
completes at the next read of it or of its node group (DescribeUpdate, ListUpdates,
DescribeNodegroup): `Successful`, the node group `ACTIVE` on the new launch template version.
The state lives on moto's cluster objects, so a reset drops it with them. docs/sandbox-eks.md
lists what AWS does that this does not.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, unquote

SERVICE = "eks"
ENTRY_TYPES = ("STANDARD", "EC2_LINUX", "EC2_WINDOWS", "FARGATE_LINUX", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX")
ACCESS_MODES = ("API", "API_AND_CONFIG_MAP")
_SCOPE = re.compile(r"Credential=[^/,\s]+/[0-9]{8}/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request")
_PRINCIPAL = re.compile(r"arn:aws[a-z-]*:(?:iam|sts)::[0-9]{12}:(?:role|user|assumed-role)/[\w+=,.@/-]+")
_POLICY = re.compile(r"arn:aws[a-z-]*:eks::aws:cluster-access-policy/[A-Za-z0-9]+")
_ROUTES = (
    ("entries", re.compile(r"/clusters/([^/]+)/access-entries")),
    ("policies", re.compile(r"/clusters/([^/]+)/access-entries/(.+)/access-policies")),
    ("policy", re.compile(r"/clusters/([^/]+)/access-entries/(.+)/access-policies/(arn:.+)")),
    ("entry", re.compile(r"/clusters/([^/]+)/access-entries/(.+)")),
    ("update_version", re.compile(r"/clusters/([^/]+)/node-groups/([^/]+)/update-version")),
    ("updates", re.compile(r"/clusters/([^/]+)/updates")),
    ("update", re.compile(r"/clusters/([^/]+)/updates/([^/]+)")),
)
_lock = threading.Lock()


class Refused(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def _now() -> float:
    return datetime.now(timezone.utc).timestamp()


def _route(path: str) -> tuple[str, tuple[str, ...]] | None:
    for name, pattern in _ROUTES:
        match = pattern.fullmatch(path)
        if match:
            return name, tuple(unquote(g) for g in match.groups())
    return None


def handles(environ: dict[str, Any]) -> bool:
    """An EKS request for one of the actions here (everything else of EKS goes to moto)."""
    signed = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return bool(signed and signed.group(2) == SERVICE and _route(environ.get("PATH_INFO", "")))


def is_nodegroup_read(environ: dict[str, Any]) -> tuple[str, str, str] | None:
    """(region, cluster, node group) of a DescribeNodegroup that moto answers, to settle its updates first."""
    signed = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    match = re.fullmatch(r"/clusters/([^/]+)/node-groups/([^/]+)", environ.get("PATH_INFO", ""))
    if signed and signed.group(2) == SERVICE and match and environ.get("REQUEST_METHOD") == "GET":
        return signed.group(1), unquote(match.group(1)), unquote(match.group(2))
    return None


def serve(environ: dict[str, Any], account: str, answer: Callable[[str, dict[str, Any], dict[str, str]],
                                                                   Iterable[bytes]]) -> Iterable[bytes]:
    """One request; ``answer(status, body, headers)`` writes the JSON response."""
    region = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", "")).group(1)  # type: ignore[union-attr]
    method = environ.get("REQUEST_METHOD", "GET")
    name, groups = _route(environ.get("PATH_INFO", ""))  # type: ignore[misc]
    query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            body = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
        except ValueError:
            raise Refused(400, "InvalidRequestException", "the request body is not JSON") from None
        with _lock:
            return answer("200 OK", _dispatch(name, method, groups, body, query, account, region), {})
    except Refused as exc:
        reason = {400: "Bad Request", 404: "Not Found", 409: "Conflict"}.get(exc.status, "Error")
        return answer(f"{exc.status} {reason}", {"message": str(exc)}, {"x-amzn-ErrorType": exc.kind})


def settle_nodegroup(account: str, region: str, cluster: str, nodegroup: str) -> None:
    """Complete the node group's update in progress (a read of it sees it done)."""
    with _lock:
        try:
            found = _cluster(account, region, cluster)
        except Refused:
            return
        for update in _updates(found).values():
            if update["nodegroup"] == nodegroup:
                _complete(found, update)


# ------------------------------------------------------------------------------- dispatch


def _dispatch(name: str, method: str, groups: tuple[str, ...], body: dict[str, Any], query: dict[str, str],
              account: str, region: str) -> dict[str, Any]:
    cluster = _cluster(account, region, groups[0])
    if name in ("entries", "entry", "policies", "policy"):
        _check_mode(cluster)
    if (name, method) == ("entries", "POST"):
        return {"accessEntry": _create_entry(cluster, body, account, region)}
    if (name, method) == ("entries", "GET"):
        wanted = query.get("associatedPolicyArn")
        entries = _entries(cluster)
        listed = [p for p, e in sorted(entries.items()) if not wanted or wanted in e["policies"]]
        return {"accessEntries": listed}
    if name == "entry":
        entry = _entry(cluster, groups[1])
        if method == "GET":
            return {"accessEntry": _shown(entry)}
        if method == "DELETE":
            del _entries(cluster)[groups[1]]
            return {}
        if method == "POST":
            return {"accessEntry": _shown(_update_entry(entry, body))}
    if name == "policies":
        entry = _entry(cluster, groups[1])
        if method == "POST":
            return _associate(cluster, entry, body)
        return {"clusterName": cluster.name, "principalArn": entry["principalArn"],
                "associatedAccessPolicies": list(entry["policies"].values())}
    if (name, method) == ("policy", "DELETE"):
        entry = _entry(cluster, groups[1])
        if entry["policies"].pop(groups[2], None) is None:
            raise Refused(404, "ResourceNotFoundException",
                          f"The specified policy {groups[2]} is not associated with the access entry")
        return {}
    if (name, method) == ("update_version", "POST"):
        return {"update": _shown_update(_update_version(cluster, groups[1], body, account, region))}
    if (name, method) == ("updates", "GET"):
        nodegroup = query.get("nodegroupName", "")
        if nodegroup:
            _nodegroup(cluster, nodegroup)
        updates = [u for u in _updates(cluster).values() if u["nodegroup"] == nodegroup]
        for update in updates:
            _complete(cluster, update)
        return {"updateIds": [u["id"] for u in updates]}
    if (name, method) == ("update", "GET"):
        update = _updates(cluster).get(groups[1])
        if update is None or update["nodegroup"] != query.get("nodegroupName", ""):
            raise Refused(404, "ResourceNotFoundException", f"No update found for ID: {groups[1]}.")
        _complete(cluster, update)
        return {"update": _shown_update(update)}
    raise Refused(404, "ResourceNotFoundException", f"no route {method} for this EKS path")


# ------------------------------------------------------------------------------- access entries


def _cluster(account: str, region: str, name: str) -> Any:
    from moto.eks.models import eks_backends

    found = eks_backends[account][region].clusters.get(name)
    if found is None:
        raise Refused(404, "ResourceNotFoundException", f"No cluster found for name: {name}.")
    return found


def _check_mode(cluster: Any) -> None:
    # a cluster created without accessConfig is CONFIG_MAP, as CreateCluster's default is
    mode = (getattr(cluster, "access_config", None) or {}).get("authenticationMode", "CONFIG_MAP")
    if mode not in ACCESS_MODES:
        raise Refused(400, "InvalidRequestException", "The cluster's authentication mode must be set to one of "
                      f"[{', '.join(ACCESS_MODES)}] to perform this operation.")


def _entries(cluster: Any) -> dict[str, dict[str, Any]]:
    if not hasattr(cluster, "amibuild_access_entries"):
        cluster.amibuild_access_entries = {}
    return cluster.amibuild_access_entries


def _entry(cluster: Any, principal: str) -> dict[str, Any]:
    entry = _entries(cluster).get(principal)
    if entry is None:
        raise Refused(404, "ResourceNotFoundException",
                      f"The specified access entry resource {principal} could not be found.")
    return entry


def _create_entry(cluster: Any, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    principal = str(body.get("principalArn") or "")
    if not _PRINCIPAL.fullmatch(principal):
        raise Refused(400, "InvalidParameterException", f"The principalArn parameter format is not valid: {principal!r}")
    kind = body.get("type") or "STANDARD"
    if kind not in ENTRY_TYPES:
        raise Refused(400, "InvalidParameterException", f"The type {kind} is not valid; one of {', '.join(ENTRY_TYPES)}")
    groups, username = list(body.get("kubernetesGroups") or []), body.get("username")
    if kind != "STANDARD" and (groups or username):
        raise Refused(400, "InvalidParameterException",
                      f"kubernetesGroups and username cannot be specified for access entries of type {kind}")
    if principal in _entries(cluster):
        raise Refused(409, "ResourceInUseException", "The specified access entry resource is already in use on "
                      "this cluster.")
    role = principal.split(":", 5)[5]
    if username is None:
        username = {"EC2_LINUX": "system:node:{{EC2PrivateDNSName}}", "EC2_WINDOWS": "system:node:{{EC2PrivateDNSName}}",
                    "FARGATE_LINUX": "system:node:{{SessionName}}"}.get(kind, principal)
    now = _now()
    entry = {"clusterName": cluster.name, "principalArn": principal, "kubernetesGroups": groups,
             "accessEntryArn": f"arn:aws:eks:{region}:{account}:access-entry/{cluster.name}/{role.split('/')[0]}/"
                               f"{account}/{role.split('/')[-1]}/{uuid.uuid4()}",
             "createdAt": now, "modifiedAt": now, "tags": dict(body.get("tags") or {}), "username": username,
             "type": kind, "policies": {}}
    _entries(cluster)[principal] = entry
    return _shown(entry)


def _update_entry(entry: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    if entry["type"] != "STANDARD" and (body.get("kubernetesGroups") or body.get("username")):
        raise Refused(400, "InvalidParameterException", "kubernetesGroups and username cannot be specified for "
                      f"access entries of type {entry['type']}")
    if "kubernetesGroups" in body:
        entry["kubernetesGroups"] = list(body["kubernetesGroups"] or [])
    if body.get("username"):
        entry["username"] = body["username"]
    entry["modifiedAt"] = _now()
    return entry


def _associate(cluster: Any, entry: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    if entry["type"] != "STANDARD":
        raise Refused(400, "InvalidRequestException", "Access policies can only be associated with access entries "
                      "of type STANDARD.")
    policy = str(body.get("policyArn") or "")
    if not _POLICY.fullmatch(policy):
        raise Refused(400, "InvalidParameterException", f"The policyArn {policy!r} is not a valid access policy.")
    scope = body.get("accessScope") or {}
    if scope.get("type") not in ("cluster", "namespace") or \
            (scope.get("type") == "namespace") != bool(scope.get("namespaces")):
        raise Refused(400, "InvalidParameterException", "accessScope: type cluster, or type namespace with namespaces")
    now = _now()
    previous = entry["policies"].get(policy)
    entry["policies"][policy] = {"policyArn": policy, "accessScope": {"type": scope["type"],
                                                                      "namespaces": list(scope.get("namespaces") or [])},
                                 "associatedAt": previous["associatedAt"] if previous else now, "modifiedAt": now}
    return {"clusterName": cluster.name, "principalArn": entry["principalArn"],
            "associatedAccessPolicy": entry["policies"][policy]}


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "policies"}


# ------------------------------------------------------------------------------- node group updates


def _nodegroup(cluster: Any, name: str) -> Any:
    found = cluster.nodegroups.get(name)
    if found is None:
        raise Refused(404, "ResourceNotFoundException", f"No node group found for name: {name}.")
    return found


def _updates(cluster: Any) -> dict[str, dict[str, Any]]:
    if not hasattr(cluster, "amibuild_updates"):
        cluster.amibuild_updates = {}
    return cluster.amibuild_updates


def _update_version(cluster: Any, name: str, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    from moto.ec2.models import ec2_backends

    group = _nodegroup(cluster, name)
    if group.status != "ACTIVE":
        raise Refused(409, "ResourceInUseException", f"Nodegroup {name} cannot be updated as it is currently not in "
                      f"Active State ({group.status}).")
    asked, params = body.get("launchTemplate"), []
    if asked:
        if not group.launch_template:
            raise Refused(400, "InvalidParameterException", "You cannot specify a launch template for a node group "
                          "that was not created with one.")
        same = (asked.get("id") in (None, group.launch_template.get("id"))
                and asked.get("name") in (None, group.launch_template.get("name")))
        if not same or not (asked.get("id") or asked.get("name")):
            raise Refused(400, "InvalidParameterException", "The launch template must be the one the node group "
                          f"uses: {group.launch_template.get('id')} ({group.launch_template.get('name')}).")
        template = ec2_backends[account][region].launch_templates.get(group.launch_template["id"])
        if template is None:
            raise Refused(400, "InvalidParameterException", f"Launch template {group.launch_template['id']} does "
                          "not exist.")
        version = str(asked.get("version") or template.default_version_number)
        if not version.isdigit() or not 1 <= int(version) <= len(template.versions):
            raise Refused(400, "InvalidParameterException", f"Launch template {template.id} has no version {version}.")
        custom_ami = bool(template.versions[int(version) - 1].data.get("ImageId"))
        if custom_ami and (body.get("version") or body.get("releaseVersion")):
            raise Refused(400, "InvalidParameterException", "You cannot specify the Kubernetes version or the "
                          "release version for a node group whose launch template names a custom AMI.")
        params = [{"type": "LaunchTemplateName", "value": template.name},
                  {"type": "LaunchTemplateVersion", "value": version}]
        to = {"launch_template_version": version}
    else:
        to = {"version": body.get("version") or cluster.version, "release": body.get("releaseVersion") or group.release_version}
        params = [{"type": "Version", "value": to["version"]}, {"type": "ReleaseVersion", "value": to["release"]}]
    update = {"id": str(uuid.uuid4()), "status": "InProgress", "type": "VersionUpdate", "params": params,
              "createdAt": _now(), "errors": [], "nodegroup": name, "to": to}
    _updates(cluster)[update["id"]] = update
    group.status = "UPDATING"
    return update


def _complete(cluster: Any, update: dict[str, Any]) -> None:
    if update["status"] != "InProgress":
        return
    group = cluster.nodegroups.get(update["nodegroup"])
    if group is not None:
        to = update["to"]
        if "launch_template_version" in to:
            group.launch_template = {**group.launch_template, "version": to["launch_template_version"]}
        else:
            group.version, group.release_version = to["version"], to["release"]
        group.status = "ACTIVE"
    update["status"] = "Successful"


def _shown_update(update: dict[str, Any]) -> dict[str, Any]:
    return {k: update[k] for k in ("id", "status", "type", "params", "createdAt", "errors")}
