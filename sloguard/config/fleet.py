"""The fleet keys of `sloguard/v1`: `discovery:` (file_sd, http_sd, kubernetes), `services:` and `ha:`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sloguard.config.units import Duration

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$")]
LabelName = Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]{0,127}$")]
PositiveDuration = Annotated[Duration, Field(gt=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileSDSpec(_Strict):
    files: list[str] = Field(min_length=1, description="Prometheus file_sd files (JSON or YAML target groups); "
                             "a glob in the last path element, as Prometheus's, is allowed")
    refresh_interval: PositiveDuration = Field(default=300.0, description="re-read every file this often even "
                                               "without a change (changes are picked up within a second)")


class HTTPSDSpec(_Strict):
    url: str = Field(pattern=r"^https?://.+", description="answers GET with Prometheus's http_sd JSON: the full "
                     "target list every time")
    refresh_interval: PositiveDuration = 60.0
    timeout: PositiveDuration = 10.0
    token_file: str | None = Field(default=None, description="sent as a Bearer token")
    token_env: str | None = None
    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _no_inline_token(cls, data: Any) -> Any:
        if isinstance(data, dict) and "token" in data:
            raise ValueError("inline 'token' is not allowed: use token_file or token_env")
        return data


class KubernetesSDSpec(_Strict):
    role: Literal["pod", "endpointslice"] = "pod"
    namespace: str | None = Field(default=None, description="the namespace to watch (default: sloguard's own, "
                                  "from its service account)")
    selector: str = Field(default="", description="a label selector, e.g. app.kubernetes.io/name=vllm")
    node: str | None = Field(default=None, description="only pods on this node (role pod): set it to "
                             "${NODE_NAME} (from the downward API) for a DaemonSet")
    port: str = Field(description="the name of the container port (role pod) or endpoint port (endpointslice) "
                      "that serves /metrics")
    kubeconfig: str | None = Field(default=None, description="a kubeconfig file (default: in-cluster service "
                                   "account)")
    ready_only: bool = Field(default=True, description="only pods whose Ready condition is true (endpoints "
                             "marked ready, for endpointslice)")


class DiscoverySpec(_Strict):
    name: Name
    file_sd: FileSDSpec | None = None
    http_sd: HTTPSDSpec | None = None
    kubernetes: KubernetesSDSpec | None = None
    scheme: Literal["http", "https"] = "http"
    metrics_path: str = Field(default="/metrics", pattern=r"^/")
    max_targets: int = Field(default=1000, gt=0, le=100_000, description="a larger answer is refused whole and the "
                             "last good list kept")
    labels: dict[LabelName, LabelName] = Field(
        default_factory=dict, description="target label <- discovered label (e.g. __meta_kubernetes_pod_label_app); "
        "file_sd/http_sd group labels and, for kubernetes, pod labels, namespace, pod and node are target labels "
        "already")

    @model_validator(mode="after")
    def _one_mechanism(self) -> DiscoverySpec:
        set_ = [k for k in ("file_sd", "http_sd", "kubernetes") if getattr(self, k) is not None]
        if len(set_) != 1:
            raise ValueError("set exactly one of file_sd, http_sd, kubernetes"
                             + (f" (got {', '.join(set_)})" if set_ else ""))
        return self

    @property
    def mechanism(self) -> str:
        """Return the mechanism's name as Prometheus labels it (file, http, kubernetes)."""
        return "file" if self.file_sd else "http" if self.http_sd else "kubernetes"


class ReplicaSpec(_Strict):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,252}$")]
    metrics_url: str = Field(pattern=r"^(https?://|file://).+")


class ServiceReplicas(_Strict):
    """Which replicas a service has: static ones, discovered ones (matched by target labels), or both."""

    replicas: list[ReplicaSpec] = Field(default_factory=list)
    discovery: Name | None = Field(default=None, description="the discovery whose targets are this service's "
                                   "replicas (those whose labels match `match`)")
    match: dict[str, str] = Field(default_factory=dict, description="target labels a discovered replica must "
                                  "carry, e.g. {app: chat}")
    replica_grace: PositiveDuration = Field(default=3600.0, description="how long a vanished replica's windows "
                                            "still count in the service's server SLOs (its series go at once)")
    max_replicas: int = Field(default=256, gt=0, le=10_000)


class HASpec(_Strict):
    mode: Literal["none", "alertmanager", "lease", "file_lock"] = Field(
        default="none", description="alertmanager: every replica sends, Alertmanager deduplicates (direct "
        "notifiers are refused); lease / file_lock: one leader elected through a Kubernetes Lease or a lock file "
        "sends to every notifier, the others stand by")
    identity: str | None = Field(default=None, description="this replica's name in the election (default: "
                                 "$POD_NAME, else host name and pid)")
    lease_name: str = Field(default="sloguard-leader", pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
    namespace: str | None = Field(default=None, description="the Lease's namespace (default: sloguard's own)")
    kubeconfig: str | None = None
    lock_file: str | None = Field(default=None, description="file_lock: a file every replica can lock (same host "
                                  "or a shared volume with working POSIX locks)")
    lease_duration: PositiveDuration = Field(default=15.0, description="a leader not heard from this long is "
                                             "replaced")
    retry_period: PositiveDuration = Field(default=2.0, description="how often the leader renews and the others "
                                           "try to take over")

    @model_validator(mode="after")
    def _needs(self) -> HASpec:
        if self.mode == "file_lock" and not self.lock_file:
            raise ValueError("mode file_lock needs lock_file")
        if self.mode == "lease" and self.retry_period * 2 > self.lease_duration:
            raise ValueError("retry_period must be at most half of lease_duration (a renewal may fail once)")
        return self
