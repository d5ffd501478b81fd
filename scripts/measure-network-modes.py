#!/usr/bin/env python3
"""Measures create+start of a hardened container with networking disabled, with network
mode `none`, and on an internal bridge, interleaved, against the local Docker engine.
Backs the choice of how `isolated` sandboxes are created. Usage:
    python3 scripts/measure-network-modes.py [iterations] [image]
"""
import http.client
import json
import socket
import statistics
import sys
import time

ITERATIONS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
IMAGE = sys.argv[2] if len(sys.argv) > 2 else "sandboxd-local/debian:bookworm"
NETWORK = "sandboxd-measure-internal"
LABEL = {"sandboxd.measure": "true"}


class UnixConnection(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost")

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect("/var/run/docker.sock")


def call(method, path, body=None):
    conn = UnixConnection()
    payload = json.dumps(body) if body is not None else None
    conn.request(method, "/v1.41" + path, body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    if response.status >= 300 and response.status != 304:
        raise RuntimeError(f"{method} {path}: {response.status} {data[:200]!r}")
    return json.loads(data) if data else None


def body(network):
    host = {
        "Init": True, "CapDrop": ["ALL"], "SecurityOpt": ["no-new-privileges"],
        "Memory": 512 << 20, "MemorySwap": 512 << 20, "PidsLimit": 256, "NanoCpus": 10**9,
    }
    config = {"Image": IMAGE, "Entrypoint": [""], "Cmd": ["tail", "-f", "/dev/null"],
              "User": "1000:1000", "Labels": LABEL, "HostConfig": host}
    if network == "disabled":
        config["NetworkDisabled"] = True
    elif network == "none":
        host["NetworkMode"] = "none"
    else:
        host["NetworkMode"] = NETWORK
    return config


def main():
    try:
        call("POST", "/networks/create", {"Name": NETWORK, "Internal": True, "Labels": LABEL,
                                          "Options": {"com.docker.network.bridge.enable_icc": "false"}})
        modes = ["disabled", "none", "internal bridge"]
        times = {mode: [] for mode in modes}
        for _ in range(ITERATIONS):
            for mode in modes:
                started = time.perf_counter()
                created = call("POST", "/containers/create", body(mode))
                call("POST", f"/containers/{created['Id']}/start")
                times[mode].append((time.perf_counter() - started) * 1000)
                call("DELETE", f"/containers/{created['Id']}?force=true")
        base = statistics.median(times["disabled"])
        for mode in modes:
            median = statistics.median(times[mode])
            print(f"{mode:<16} create+start median {median:7.1f} ms  ({median / base:.2f}x disabled)")
    finally:
        for container in call("GET", '/containers/json?all=true&filters={"label":["sandboxd.measure=true"]}') or []:
            call("DELETE", f"/containers/{container['Id']}?force=true")
        try:
            call("DELETE", f"/networks/{NETWORK}")
        except RuntimeError:
            pass


if __name__ == "__main__":
    main()
