"""The Multus config gpuaas hands the Network Operator (``secondaryNetwork.multus.config``).

Why gpuaas writes it: the operator's default is Multus' "auto" mode, which copies the primary
CNI's conf but leaves ``namespaceIsolation`` off — then any pod may name another team's NAD
(``<ns>/<nad>``) and land on that team's partition. With a config set, the operator mounts it as
``/tmp/multus-conf/00-multus.conf`` and starts the thin plugin with ``--multus-conf-file`` on it
(Mellanox/network-operator manifests/state-multus-cni/0050-multus-ds.yml).

The keys are Multus' own (k8snetworkplumbingwg/multus-cni docs/configuration.md):

* ``namespaceIsolation: true`` — a pod may use NADs of its own namespace only;
* ``globalNamespaces`` — replaces the built-in exception for ``default``; it names the Network
  Operator namespace (holds no gpuaas NAD), because an empty value keeps ``default`` open to all;
* ``clusterNetwork`` + ``confDir`` — Multus looks the primary network up as a NAD in
  ``kube-system`` first, then by its ``name`` among the conf files of ``confDir``. Multus' own
  ``confDir`` default (``/etc/cni/multus/net.d``) holds nothing on a normal node, so it is set to
  the directory where the primary CNI writes its conf;
* ``kubeconfig`` — written by the thin plugin's entrypoint below the operator's CNI directory;
  without it Multus cannot read NADs. The directory is one setting, ``platform.multus.cniConfDir``:
  it is Multus' ``confDir``, the kubeconfig's directory and the chart's
  ``operator.cniNetworkDirectory`` (where the operator writes ``00-multus.conf``), so a runtime
  with another CNI directory (k3s, RKE2) is configured in one place;
* ``capabilities`` — ``portMappings`` and ``bandwidth``, forwarded to the cluster network.

The admission policy in :mod:`components.tenancy.admission` rejects the same cross-namespace references
at the API server, so a pod is refused before it is scheduled; Multus is the node-side backstop.
"""

from __future__ import annotations

import json
from typing import Any, Final

from components.model import resources
from components.model.fabric import Multus

#: Where the thin plugin's entrypoint writes Multus' kubeconfig, below the CNI conf directory
#: (multus-cni deployments/multus-daemonset.yml; the operator's ``--multus-kubeconfig-file-host``).
KUBECONFIG_IN_CONF_DIR: Final = "multus.d/multus.kubeconfig"
#: Runtime capabilities Multus forwards to the cluster network: the thin entrypoint's "auto"
#: mode copies the primary CNI's; without them hostPort and the bandwidth annotations silently
#: stop working for every pod (multus-cni docs/configuration.md, ``capabilities``).
CAPABILITIES: Final = {"portMappings": True, "bandwidth": True}
#: The network name of the Multus conf itself; any other name is the primary CNI's.
NETWORK_NAME: Final = resources.MULTUS_NETWORK
#: CNI spec version the Network Operator starts the thin plugin with (``--cni-version=0.3.1``).
CNI_VERSION: Final = "0.3.1"


def global_namespaces(operator_namespace: str) -> list[str]:
    """Namespaces whose NADs every pod may use: only the Network Operator's, never ``default``."""
    return [operator_namespace]


def kubeconfig(multus: Multus) -> str:
    """Multus' kubeconfig on the host: the operator writes it below its CNI conf directory."""
    return f"{multus.cni_conf_dir.rstrip('/')}/{KUBECONFIG_IN_CONF_DIR}"


def config(operator_namespace: str, multus: Multus) -> dict[str, Any]:
    """Multus thin-plugin config with the cluster CNI described by ``multus``; ``operator_namespace``
    is the Network Operator's (``gpuaas:network.namespace``)."""
    conf: dict[str, Any] = {
        "cniVersion": CNI_VERSION,
        "name": NETWORK_NAME,
        "type": "multus",
        "kubeconfig": kubeconfig(multus),
        "capabilities": dict(CAPABILITIES),
        "confDir": multus.cni_conf_dir,
        "clusterNetwork": multus.cluster_network,
        "namespaceIsolation": True,
        "globalNamespaces": ",".join(global_namespaces(operator_namespace)),
        "logToStderr": True,
        "logLevel": "error",
    }
    if multus.readiness_indicator_file is not None:
        conf["readinessindicatorfile"] = multus.readiness_indicator_file
    return conf


def config_json(operator_namespace: str, multus: Multus) -> str:
    """:func:`config` as the string ``NicClusterPolicy.spec.secondaryNetwork.multus.config`` takes."""
    return json.dumps(config(operator_namespace, multus), indent=2) + "\n"
