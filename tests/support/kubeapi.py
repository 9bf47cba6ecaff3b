"""A Kubernetes API server double that follows list/watch semantics, for sloguard's Kubernetes discovery.

Pods live in one namespace with one resourceVersion counter, as etcd's. `GET .../pods` lists (labelSelector
and fieldSelector spec.nodeName honoured, metadata.resourceVersion set); `?watch=true&resourceVersion=N` streams
the recorded events after N, then new ones as the test makes them, with a BOOKMARK (allowWatchBookmarks)
after each batch; a resourceVersion older than the compaction point gets an ERROR event with a 410 Status, as
kube-apiserver sends it ("too old resource version"). Objects are shaped as kube-apiserver returns them.

Leases (coordination.k8s.io/v1, for ha.mode lease): get, create (409 AlreadyExists when it exists) and update
(PUT: 409 Conflict unless the body's resourceVersion is the stored one, as optimistic concurrency in the API server).
Every lease request is logged with the double's receive time and outcome; `refuse` makes the double answer one
holder's writes with 500 (a replica cut off from the API server while the others reach it).
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web


def pod(name: str, ip: str, labels: dict[str, str], node: str = "node-a", ready: bool = True,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """Return a running vLLM pod as `kubectl get pod -o json` shows one (the fields discovery reads)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "llm", "uid": f"uid-{name}", "labels": labels,
                     "annotations": annotations or {}, "creationTimestamp": "2026-11-30T10:00:00Z"},
        "spec": {"nodeName": node, "containers": [{
            "name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
            "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": ip, "hostIP": "10.1.0.1",
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                   "lastTransitionTime": "2026-11-30T10:01:00Z"}]},
    }


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """Return a metav1.Status as kube-apiserver sends it with an error."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


@dataclass(frozen=True)
class LeaseCall:
    """One lease request as the double saw it: when, what, its HTTP status, the holder and renewTime written."""

    at: float
    verb: str
    code: int
    holder: str = ""
    renew: str = ""


class KubeAPI:
    """The state and routes of the double; mutate it with add/delete/compact from the test."""

    def __init__(self) -> None:
        self.rv = 100
        self.leases: dict[str, dict[str, Any]] = {}
        self.lease_calls: list[LeaseCall] = []
        self.refuse: str | None = None  # a holderIdentity whose lease writes get 500
        self.pods: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted = 0
        self.changed = asyncio.Condition()
        self.requests: list[str] = []

    async def _bump(self, kind: str, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if kind == "DELETED":
            self.pods.pop(obj["metadata"]["name"], None)
        else:
            self.pods[obj["metadata"]["name"]] = obj
        self.events.append((self.rv, kind, obj))
        async with self.changed:
            self.changed.notify_all()

    async def add(self, obj: dict[str, Any]) -> None:
        await self._bump("ADDED", obj)

    async def delete(self, name: str) -> None:
        await self._bump("DELETED", self.pods[name])

    async def compact(self) -> None:
        """Forget the event history (etcd compaction): watches from an older resourceVersion get 410."""
        self.compacted = self.rv
        async with self.changed:
            self.changed.notify_all()

    def _match(self, obj: dict[str, Any], request: web.Request) -> bool:
        for term in filter(None, request.query.get("labelSelector", "").split(",")):
            key, _, value = term.partition("=")
            if obj["metadata"].get("labels", {}).get(key) != value:
                return False
        field = request.query.get("fieldSelector", "")
        return not field.startswith("spec.nodeName=") or obj["spec"]["nodeName"] == field.split("=", 1)[1]

    async def pods_route(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.query_string)
        if request.query.get("watch") == "true":
            return await self._watch(request)
        items = [p for p in self.pods.values() if self._match(p, request)]
        return web.json_response({"apiVersion": "v1", "kind": "PodList",
                                  "metadata": {"resourceVersion": str(self.rv)}, "items": items})

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or self.rv)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        bookmarks = request.query.get("allowWatchBookmarks") == "true"
        while True:
            if since < self.compacted:
                status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
                          "code": 410, "message": f"too old resource version: {since} ({self.compacted})"}
                await resp.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
                return resp
            batch = [(rv, k, o) for rv, k, o in self.events if rv > since and self._match(o, request)]
            for rv, kind, obj in batch:
                await resp.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                since = rv
            if batch and bookmarks:
                mark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.rv)}}
                await resp.write(json.dumps({"type": "BOOKMARK", "object": mark}).encode() + b"\n")
                since = self.rv
            async with self.changed:
                await self.changed.wait()

    def _lease_answer(self, verb: str, code: int, body: dict[str, Any]) -> web.Response:
        spec = body.get("spec") or {}
        self.lease_calls.append(LeaseCall(time.time(), verb, code, str(spec.get("holderIdentity") or ""),
                                          str(spec.get("renewTime") or "")))
        # exactly "application/json", as kube-apiserver: lightkube turns only that into an ApiError with the Status
        return web.Response(body=json.dumps(body).encode(), status=code, headers={"Content-Type": "application/json"})

    async def lease_get(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self.leases:
            return self._lease_answer("get", 404, status(404, "NotFound",
                                                         f'leases.coordination.k8s.io "{name}" not found'))
        return self._lease_answer("get", 200, self.leases[name])

    def _stored(self, obj: dict[str, Any], ns: str) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.update({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"})
        obj["metadata"] = {**obj.get("metadata", {}), "namespace": ns, "resourceVersion": str(self.rv)}
        self.leases[obj["metadata"]["name"]] = obj
        return obj

    async def lease_create(self, request: web.Request) -> web.Response:
        obj = json.loads(await request.read())
        name = obj["metadata"]["name"]
        if (obj.get("spec") or {}).get("holderIdentity") == self.refuse:
            return self._lease_answer("create", 500, status(500, "InternalError", "etcdserver: request timed out"))
        if name in self.leases:
            return self._lease_answer("create", 409, status(409, "AlreadyExists",
                                                            f'leases.coordination.k8s.io "{name}" already exists'))
        return self._lease_answer("create", 201, self._stored(obj, request.match_info["ns"]))

    async def lease_update(self, request: web.Request) -> web.Response:
        obj = json.loads(await request.read())
        name = request.match_info["name"]
        if (obj.get("spec") or {}).get("holderIdentity") == self.refuse:
            return self._lease_answer("update", 500, status(500, "InternalError", "etcdserver: request timed out"))
        if name not in self.leases:
            return self._lease_answer("update", 404, status(404, "NotFound",
                                                            f'leases.coordination.k8s.io "{name}" not found'))
        if obj.get("metadata", {}).get("resourceVersion") != self.leases[name]["metadata"]["resourceVersion"]:
            return self._lease_answer("update", 409, status(
                409, "Conflict", f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": the object '
                "has been modified; please apply your changes to the latest version and try again"))
        return self._lease_answer("update", 200, self._stored(obj, request.match_info["ns"]))

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/pods", self.pods_route)
        leases = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
        app.router.add_get(leases + "/{name}", self.lease_get)
        app.router.add_post(leases, self.lease_create)
        app.router.add_put(leases + "/{name}", self.lease_update)
        return app


def kubeconfig(url: str) -> str:
    """Return a kubeconfig naming the double (a bearer token it does not check), namespace llm."""
    return f"""\
apiVersion: v1
kind: Config
clusters: [{{name: test, cluster: {{server: "{url}"}}}}]
users: [{{name: test, user: {{token: test-token}}}}]
contexts: [{{name: test, context: {{cluster: test, user: test, namespace: llm}}}}]
current-context: test
"""
