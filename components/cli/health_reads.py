"""What `health` reads live: the reservation through the Compute API, the cluster through the Kubernetes API.

Both answer in the offline files' shapes, so the command has one path: the Compute answers become the
`--reservation` file's invoke results (components/reservation_reads.py FileSource), the Kubernetes answers the
cluster-state file's lists, each item as the API returns it.

Compute REST (https://cloud.google.com/compute/docs/reference/rest/beta/reservationSubBlocks): `get` of a block or a
sub-block answers `{"resource": {...}}`, `list` `{"items": [...]}`; the provider's data source flattens the
sub-block's `count`, `inUseCount`, `healthInfo`, `reservationSubBlockMaintenance` and `physicalTopology` into
`subBlockCount`, `inUseCount` and one-item lists (pulumi-gcp 10.2 GetReservationSubBlockResult). GKE:
`projects.locations.clusters.get` (container v1), a 404 meaning no cluster yet. Credentials: Application Default
Credentials, as the workflow's google-github-actions/auth sets them (permissions: docs/reservation.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from components.model.tpu.slices import SLICE_GROUP, SLICE_PLURAL

COMPUTE = "https://compute.googleapis.com/compute/beta"
CONTAINER = "https://container.googleapis.com/v1"
KUEUE_GROUP = "kueue.x-k8s.io"
TIMEOUT_S = 30


class ReadError(Exception):
    """A live read failed: one line naming what was read and the API's answer."""


class Session(Protocol):
    def get(self, url: str, params: dict[str, Any] | None = None, timeout: float = ...) -> Any: ...


def adc_session() -> Session:
    """An authorized HTTP session with Application Default Credentials (imported lazily: offline needs none)."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError as err:
        raise ReadError(f"no Google Cloud credentials: {' '.join(str(err).split())}") from None
    return AuthorizedSession(credentials)


def _get(session: Session, url: str, what: str, missing_ok: bool = False) -> dict[str, Any] | None:
    try:
        response = session.get(url, timeout=TIMEOUT_S)
    except Exception as err:  # requests' and google-auth's errors: all mean "could not read"
        raise ReadError(f"could not read {what}: {type(err).__name__}: {' '.join(str(err).split())[:200]}") from None
    if response.status_code == 404 and missing_ok:
        return None
    if response.status_code != 200:
        try:
            message = response.json().get("error", {}).get("message", "")
        except ValueError:
            message = ""
        raise ReadError(f"could not read {what}: HTTP {response.status_code} {message}".rstrip())
    return dict(response.json())


def _pages(session: Session, url: str, what: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        page = _get(session, url + (f"?pageToken={token}" if token else ""), what) or {}
        items += page.get("items") or []
        token = page.get("nextPageToken") or ""
        if not token:
            return items


def reservation_data(
    session: Session, *, project: str, zone: str, reservation: str, block: str, cluster: tuple[str, str, str]
) -> dict[str, Any]:
    """The four reads as the `--reservation` file holds them (every sub-block of the block is read)."""
    base = f"{COMPUTE}/projects/{project}/zones/{zone}/reservations/{reservation}"
    res = _get(session, base, f"reservation {reservation}", missing_ok=True)
    out: dict[str, Any] = {"getReservation": {}, "getReservationBlock": None, "getReservationSubBlock": []}
    if res is None:
        return out
    blocks = [b["name"] for b in _pages(session, f"{base}/reservationBlocks", f"the blocks of {reservation}")]
    out["getReservation"] = {"name": reservation, "selfLink": res.get("selfLink", base), "blockNames": blocks}
    if not block:  # the reservation alone (its zone and blocks, components/placement.py)
        got = _cluster(session, *cluster)
        out["getCluster"] = cluster_wire(got) if got is not None else None
        return out
    where = f"{base}/reservationBlocks/{block}"
    blk = _get(session, where, f"block {block} of {reservation}", missing_ok=True)
    if blk is None:
        return out
    names = [s["name"] for s in _pages(session, f"{where}/reservationSubBlocks", f"the sub-blocks of {block}")]
    out["getReservationBlock"] = {"name": block, "subBlockNames": names}
    for name in names:
        got = _get(session, f"{where}/reservationSubBlocks/{name}", f"sub-block {name}") or {}
        raw = got.get("resource") or got  # `get` answers {"resource": {...}} (ReservationSubBlocksGetResponse)
        out["getReservationSubBlock"].append(sub_block_wire(raw))
    got = _cluster(session, *cluster)
    out["getCluster"] = cluster_wire(got) if got is not None else None
    return out


def _cluster(session: Session, project: str, location: str, name: str) -> dict[str, Any] | None:
    """GKE's `projects.locations.clusters.get`; None when the cluster does not exist."""
    url = f"{CONTAINER}/projects/{project}/locations/{location}/clusters/{name}"
    return _get(session, url, f"cluster {name}", missing_ok=True)


def sub_block_wire(raw: dict[str, Any]) -> dict[str, Any]:
    """A REST ReservationSubBlock in the data source's wire shape (its nested messages as one-item lists)."""
    one = lambda key: [raw[key]] if raw.get(key) else []  # noqa: E731
    return {
        "name": raw.get("name"),
        "status": raw.get("status"),
        "subBlockCount": raw.get("count"),
        "inUseCount": raw.get("inUseCount", 0),
        "healthInfos": one("healthInfo"),
        "reservationSubBlockMaintenances": one("reservationSubBlockMaintenance"),
        "physicalTopologies": one("physicalTopology"),
    }


def cluster_wire(raw: dict[str, Any]) -> dict[str, Any]:
    """GKE's Cluster in getCluster's wire shape: only what the sub-block mapping reads (the pools' affinities)."""
    pools = []
    for pool in raw.get("nodePools") or []:
        affinity = (pool.get("config") or {}).get("reservationAffinity")
        config = {"reservationAffinities": [affinity] if affinity else []}
        pools.append({"name": pool.get("name"), "nodeConfigs": [config]})
    return {"name": raw.get("name"), "nodePools": pools}


def gke_kubeconfig(session: Session, *, project: str, location: str, name: str, dns: bool) -> dict[str, Any]:
    """The kubeconfig the program itself gives its Kubernetes provider (components/cluster.py kubeconfig: the
    DNS-based endpoint when `cluster.controlPlane.dnsEndpoint`, else the IP endpoint with the cluster's CA;
    gke-gcloud-auth-plugin for the credential), built from what GKE answers for the cluster."""
    import json

    from components.cluster import kubeconfig

    raw = _cluster(session, project, location, name)
    if raw is None:
        raise ReadError(f"cluster {name} does not exist in project {project}, location {location}")
    context = f"gke_{project}_{location}_{name}"
    if dns:
        endpoint = ((raw.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig") or {}).get("endpoint")
        if not endpoint:
            raise ReadError(f"cluster {name} has no DNS-based endpoint (controlPlaneEndpointsConfig.dnsEndpointConfig)")
        return dict(json.loads(kubeconfig(context, endpoint, None)))
    ca = (raw.get("masterAuth") or {}).get("clusterCaCertificate") or ""
    return dict(json.loads(kubeconfig(context, str(raw.get("endpoint") or ""), ca)))


def api_client_from(config: dict[str, Any]) -> Any:
    from kubernetes import config as kube_config

    try:
        return kube_config.new_client_from_config_dict(config)
    except kube_config.ConfigException as err:
        raise ReadError(f"cannot use the cluster's kubeconfig: {' '.join(str(err).split())}") from None


def cluster_state(api: Any, pools: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The stack's TPU nodes, every Slice and every Kueue Workload, as plain API objects.

    `api` is a `kubernetes.client.ApiClient` (components/cli/verify_reads.py api_client: the kubeconfig or in-cluster
    configuration). Each group's preferred version comes from discovery, as the teardown gate does; a group the
    cluster does not serve gives an empty list.
    """
    from kubernetes import client

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    plain: Callable[[Any], Any] = api.sanitize_for_serialization
    try:
        selector = f"cloud.google.com/gke-nodepool in ({','.join(pools)})" if pools else None
        nodes = plain(core.list_node(label_selector=selector).items) if pools else []
        groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups or []}

        def listed(group: str, plural: str) -> list[dict[str, Any]]:
            if group not in groups:
                return []
            version = groups[group].preferred_version.version
            return list(custom.list_cluster_custom_object(group, version, plural).get("items") or [])

        return {
            "nodes": nodes,
            "slices": listed(SLICE_GROUP, SLICE_PLURAL),
            "workloads": listed(KUEUE_GROUP, "workloads"),
        }
    except client.exceptions.ApiException as err:
        raise ReadError(f"could not read the cluster: HTTP {err.status} {err.reason}") from None
    except Exception as err:  # urllib3's connection errors
        text = " ".join(str(err).split())[:200]
        raise ReadError(f"could not read the cluster: {type(err).__name__}: {text}") from None
