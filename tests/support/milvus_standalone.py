"""Run the Milvus standalone server of the ``milvus`` package (2.3.5) on 127.0.0.1 only.

    python -m tests.support.milvus_standalone DATA_DIR PORTS_JSON

The package's own ``milvus-server`` command fits one server per machine poorly: it
probes for free ports upward from Milvus's defaults and silently moves one it cannot
bind (a port left in TIME_WAIT by a killed server moves the proxy on restart), it
leaves the embedded etcd on 2379/2380 whatever ``--etcd-port`` says, and the server's
parts register under the machine's first non-loopback address and talk to each other
there. This launcher writes the package's configuration template with the given
ports (the same on every restart), every part's address set to 127.0.0.1 and the
embedded etcd's own configuration, then replaces itself with the server binary, so
that signals reach the server itself.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

#: The configuration template's port keys, each given a port of its own.
PORT_KEYS = (
    "proxy_port",
    "etcd_port",
    "root_coord_port",
    "proxy_internal_port",
    "query_coord_port",
    "query_node_port",
    "index_coord_port",
    "index_node_port",
    "data_coord_port",
    "data_node_port",
)
#: Two more: etcd's peer port and the metrics / health port (``/healthz``).
EXTRA_PORTS = ("etcd_peer_port", "metrics_port")
COMPONENTS = ("rootCoord", "proxy", "queryCoord", "queryNode", "indexNode", "dataCoord", "dataNode")


def main(data_dir: str, ports_json: str) -> None:
    import milvus

    ports = json.loads(ports_json)

    class Config(milvus.MilvusServerConfig):
        def try_bind_port(self, port: int) -> socket.socket | None:
            # As the server binds it (SO_REUSEADDR): a port in TIME_WAIT is free.
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
                sock.listen()
            except OSError:
                sock.close()
                return None
            return sock

    config = Config(data_dir=data_dir, **{key: ports[key] for key in PORT_KEYS})
    for component in COMPONENTS:
        config.set(f"{component}.ip", "127.0.0.1")
    config.resolve()  # writes configs/milvus.yaml under data_dir
    base = Path(config.base_data_dir)
    milvus._initialize_data_files(str(base))  # the server binary and its libraries
    etcd = base / "configs" / "embed-etcd.yaml"
    client = f"http://127.0.0.1:{ports['etcd_port']}"
    peer = f"http://127.0.0.1:{ports['etcd_peer_port']}"
    etcd.write_text(
        f"listen-client-urls: {client}\nadvertise-client-urls: {client}\n"
        f"listen-peer-urls: {peer}\ninitial-advertise-peer-urls: {peer}\n"
        f"initial-cluster: default={peer}\n"
    )
    binary = base / "bin" / "milvus"
    environment = {
        **os.environ,
        "DEPLOY_MODE": "STANDALONE",
        "METRICS_PORT": str(ports["metrics_port"]),
        "ETCD_CONFIG_PATH": str(etcd),
        "LD_LIBRARY_PATH": f"{binary.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}",
    }
    os.chdir(base)
    os.execve(binary, [str(binary), "run", "standalone"], environment)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
