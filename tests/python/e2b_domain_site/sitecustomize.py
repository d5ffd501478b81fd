"""Loopback names for an E2B domain in tests: with `E2B_LOOPBACK_DOMAIN=<domain>`, every
host name under the domain (`api.<domain>`, `49983-<id>.<domain>`) resolves to
127.0.0.1 in this Python process, as a wildcard DNS record would send it to the
proxy in front of sandboxd. Put this directory on PYTHONPATH to load it."""

import os
import socket

_domain = os.environ.get("E2B_LOOPBACK_DOMAIN", "").split(":")[0].lower()
if _domain:
    _resolve = socket.getaddrinfo

    def _loopback(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if isinstance(name, str) and name.lower().rstrip(".").endswith("." + _domain):
            host = "127.0.0.1"
        return _resolve(host, *args, **kwargs)

    socket.getaddrinfo = _loopback
