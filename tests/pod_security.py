"""The Pod Security Standards' checks, as Pod Security Admission runs them on a pod spec
(kubernetes/kubernetes staging/src/k8s.io/pod-security-admission/policy/check_*.go, at the commits the tests cite;
https://kubernetes.io/docs/concepts/security/pod-security-standards/). `violations(spec, level)` names every check
of `level` (and of the levels below it) the spec fails, as PSA's forbidden reasons would.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# check_capabilities_baseline.go: capabilities_allowed_1_0.
DEFAULT_CAPABILITIES = {
    *("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE"),
    *("SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"),
}
# check_restrictedVolumes.go: the volume sources `restricted` allows.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected"}
RESTRICTED_VOLUMES |= {"secret"}
# check_sysctls.go: the safe set (1.0, 1.27, 1.29, 1.32 additions).
SAFE_SYSCTLS = {
    *("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start"),
    *("net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports"),
    *("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl"),
    *("net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"),
}


def containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from (*spec.get("initContainers", []), *spec.get("containers", []), *spec.get("ephemeralContainers", []))


def _seccomp(context: dict[str, Any] | None) -> str | None:
    return ((context or {}).get("seccompProfile") or {}).get("type")


def _handlers(c: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        if key in c:
            yield c[key]
    yield from (c.get("lifecycle") or {}).values()


def baseline(spec: dict[str, Any]) -> list[str]:
    out = [f"host namespaces ({k})" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    pod = spec.get("securityContext") or {}
    if _seccomp(pod) == "Unconfined":
        out.append("seccompProfile (pod Unconfined)")
    for sysctl in pod.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            out.append(f"forbidden sysctls ({sysctl['name']})")
    if any("hostPath" in v for v in spec.get("volumes", [])):
        out.append("hostPath volumes")
    for c in containers(spec):
        sc, name = c.get("securityContext") or {}, c["name"]
        if sc.get("privileged"):
            out.append(f"privileged ({name})")
        added = set((sc.get("capabilities") or {}).get("add") or []) - DEFAULT_CAPABILITIES
        if added:
            out.append(f"non-default capabilities ({name}: {sorted(added)})")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"hostPort ({name})")
        if _seccomp(sc) == "Unconfined":
            out.append(f"seccompProfile ({name} Unconfined)")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"procMount ({name})")
        if ((sc.get("appArmorProfile") or {}).get("type")) == "Unconfined":
            out.append(f"appArmorProfile ({name})")
        if any(h.get(k, {}).get("host") for h in _handlers(c) for k in ("httpGet", "tcpSocket")):
            out.append(f"probe or lifecycle host ({name})")
    return out


def restricted(spec: dict[str, Any]) -> list[str]:
    out = baseline(spec)
    pod = spec.get("securityContext") or {}
    for volume in spec.get("volumes", []):
        sources = set(volume) - {"name"}
        if not sources <= RESTRICTED_VOLUMES:
            out.append(f"restricted volume types ({volume['name']}: {sorted(sources)})")
    for c in containers(spec):
        sc, name = c.get("securityContext") or {}, c["name"]
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"allowPrivilegeEscalation != false ({name})")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"unrestricted capabilities ({name}: drop ALL)")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"unrestricted capabilities ({name}: add)")
        if not sc.get("runAsNonRoot", pod.get("runAsNonRoot")):
            out.append(f"runAsNonRoot != true ({name})")
        if sc.get("runAsUser", pod.get("runAsUser")) == 0:
            out.append(f"runAsUser=0 ({name})")
        if (_seccomp(sc) or _seccomp(pod)) not in ("RuntimeDefault", "Localhost"):
            out.append(f"seccompProfile ({name} unset)")
    return out


LEVELS = {"baseline": baseline, "restricted": restricted}


def violations(spec: dict[str, Any], level: str) -> list[str]:
    return LEVELS[level](spec)
