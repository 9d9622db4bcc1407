"""What a node group stack remembers of the node settings amibuild put in, and how a deploy changes it. Pure.

A stack made from amibuild's node group template keeps each setting it was given as a stack
parameter (`PARAMETERS`): the proxy, extra NO_PROXY entries, kubelet flags, node labels, taints,
max pods (and the classic `BootstrapArguments`). The user data is written from those settings on
every deploy, so `nodegroup-deploy` without `--proxy` keeps the proxy the stack has instead of
sending user data without it. A setting changes only when its flag is given: a value replaces
it, ``none`` removes it (`REMOVE`).

    asked = Asked.parse(proxy=..., kubelet_flags=[...], ...)   # flags as given, checked
    settings = asked.merge(previous_parameters)                 # what the nodes get now
    settings.to_parameters()                                    # every setting, for the stack
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from amibuild import secrets
from amibuild.errors import SpecError
from amibuild.handoff.userdata.kubelet import PARAMETERS as KUBELET_PARAMETERS
from amibuild.handoff.userdata.kubelet import KubeletSettings
from amibuild.pipeline import proxy_credentials

REMOVE = "none"  # the value that removes a setting, as `--bypass none` does
PROXY = "HttpProxy"
PROXY_CREDENTIALS_PARAMETER = "ProxyCredentialsParameter"
NO_PROXY = "NoProxy"
BOOTSTRAP = "BootstrapArguments"
# Stack parameters holding amibuild's node settings, with the flag that sets each.
PARAMETERS: Mapping[str, str] = {
    PROXY: "--proxy",
    PROXY_CREDENTIALS_PARAMETER: "--proxy-credentials-parameter",
    NO_PROXY: "--no-proxy",
    "KubeletFlags": "--kubelet-flag",
    "NodeLabels": "--node-label",
    "NodeTaints": "--taint",
    "MaxPods": "--max-pods",
    "MaxPodsExpression": "--max-pods-expression",
}
assert set(KUBELET_PARAMETERS) <= set(PARAMETERS)


@dataclass(frozen=True)
class NodeSettings:
    """The settings the nodes get (after a deploy)."""

    proxy: str = ""
    no_proxy: tuple[str, ...] = ()
    kubelet: KubeletSettings = field(default_factory=KubeletSettings)
    proxy_credentials_parameter: str = ""  # the SecureString the nodes read the proxy's user:password from

    def to_parameters(self) -> dict[str, str]:
        return {PROXY: self.proxy, PROXY_CREDENTIALS_PARAMETER: self.proxy_credentials_parameter,
                NO_PROXY: ",".join(self.no_proxy), **self.kubelet.to_parameters()}

    @classmethod
    def from_parameters(cls, values: Mapping[str, str]) -> NodeSettings:
        return cls(values.get(PROXY, ""), tuple(e for e in values.get(NO_PROXY, "").split(",") if e),
                   KubeletSettings.from_parameters(values), values.get(PROXY_CREDENTIALS_PARAMETER, ""))


@dataclass(frozen=True)
class Asked:
    """The setting flags of one deploy: None where a flag was not given (keep the stack's)."""

    proxy: str | None = None
    no_proxy: tuple[str, ...] | None = None
    kubelet_flags: tuple[str, ...] | None = None
    labels: tuple[str, ...] | None = None
    taints: tuple[str, ...] | None = None
    max_pods: str | None = None
    proxy_credentials_parameter: str | None = None
    max_pods_expression: str | None = None

    @classmethod
    def parse(cls, *, proxy: str = "", no_proxy: Iterable[str] = (), kubelet_flags: Iterable[str] = (),
              labels: Iterable[str] = (), taints: Iterable[str] = (), max_pods: str | int | None = None,
              proxy_credentials_parameter: str = "", max_pods_expression: str = "") -> Asked:
        """Flags as given ("" or nothing: not given; ``none``: remove), each value checked."""
        def listed(values: Iterable[str], flag: str, comma: bool = False) -> tuple[str, ...] | None:
            items = [part for value in values for part in (value.split(",") if comma else [value]) if part]
            if not items:
                return None
            if REMOVE in items:
                if items != [REMOVE]:
                    raise SpecError(f"{flag} {REMOVE} removes the setting: give it alone")
                return ()
            return tuple(items)

        def single(value: str) -> str | None:
            return None if not value else ("" if value == REMOVE else value)

        asked = cls(
            proxy=single(proxy),
            no_proxy=listed(no_proxy, "--no-proxy", comma=True),
            kubelet_flags=listed(kubelet_flags, "--kubelet-flag"),
            labels=listed(labels, "--node-label"),
            taints=listed(taints, "--taint"),
            max_pods=single("" if max_pods is None else str(max_pods)),
            proxy_credentials_parameter=single(proxy_credentials_parameter),
            max_pods_expression=single(max_pods_expression),
        )
        if asked.proxy_credentials_parameter:
            proxy_credentials.check_name(asked.proxy_credentials_parameter, "--proxy-credentials-parameter")
        # Each value checked before any AWS call; the merge checks the combination again.
        KubeletSettings.parse(flags=asked.kubelet_flags or (), labels=asked.labels or (),
                              taints=asked.taints or (), max_pods=asked.max_pods or None,
                              max_pods_expression=asked.max_pods_expression or None)
        return asked

    def merge(self, previous: Mapping[str, str]) -> NodeSettings:
        """The settings after this deploy: the stack's (`previous` parameters), with what was asked."""
        before = NodeSettings.from_parameters(previous)
        old = before.kubelet
        kubelet = KubeletSettings.parse(
            flags=old.flags if self.kubelet_flags is None else self.kubelet_flags,
            labels=[f"{k}={v}" for k, v in old.labels] if self.labels is None else self.labels,
            taints=[str(t) for t in old.taints] if self.taints is None else self.taints,
            # one way to size pods: a new fixed value drops the stack's expression, and the other way round
            # (removing one with `none` leaves the other as it is)
            max_pods=(None if self.max_pods_expression else old.max_pods) if self.max_pods is None
            else (self.max_pods or None),
            max_pods_expression=(None if self.max_pods else old.max_pods_expression)
            if self.max_pods_expression is None else (self.max_pods_expression or None),
        )
        proxy = before.proxy if self.proxy is None else self.proxy
        no_proxy = before.no_proxy if self.no_proxy is None else self.no_proxy
        if no_proxy and not proxy:
            if self.no_proxy:
                raise SpecError("--no-proxy goes with --proxy (the stack has no proxy)")
            no_proxy = ()  # the proxy was removed: its exceptions go with it
        parameter = before.proxy_credentials_parameter if self.proxy_credentials_parameter is None \
            else self.proxy_credentials_parameter
        if parameter and not proxy:
            if self.proxy_credentials_parameter:
                raise SpecError("--proxy-credentials-parameter goes with --proxy (the stack has no proxy)")
            parameter = ""  # the proxy was removed: where its credentials were goes with it
        if parameter and self.proxy is not None and self.proxy_credentials_parameter is None \
                and secrets.credentials(self.proxy):
            parameter = ""  # a new --proxy with its own user:password@ replaces the stack's parameter
        return NodeSettings(proxy, no_proxy, kubelet, parameter)
