"""A TLS proxy for tests, standing where an operator's proxy (Caddy, nginx) stands in
front of sandboxd on an E2B domain: it ends TLS with a certificate for the domain and
its subdomains, made here with openssl, and passes each connection's bytes to
sandboxd's plain listener as they are. Loopback only.

    python3 tests/python/tls_proxy.py DOMAIN LISTEN_PORT BACKEND_PORT DIR

writes DIR/ca.pem (the authority clients are told to trust) and DIR/ready once
listening.
"""

import asyncio
import os
import ssl
import subprocess
import sys

domain, listen_port, backend_port, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ca, cert, key = (os.path.join(folder, name) for name in ("ca.pem", "cert.pem", "key.pem"))
names = f"subjectAltName=DNS:{domain},DNS:*.{domain}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
open(os.path.join(folder, "leaf.ext"), "w").write(names)
for command in (
    # A certificate authority of this run's own (what clients trust), and the
    # proxy's certificate, signed by it.
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=sandboxd test CA",
     "-keyout", os.path.join(folder, "ca.key"), "-out", ca],
    ["req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={domain}",
     "-keyout", key, "-out", os.path.join(folder, "leaf.csr")],
    ["x509", "-req", "-days", "1", "-in", os.path.join(folder, "leaf.csr"), "-CA", ca,
     "-CAkey", os.path.join(folder, "ca.key"), "-CAcreateserial", "-out", cert,
     "-extfile", os.path.join(folder, "leaf.ext")],
):
    subprocess.run(["openssl", *command], check=True, capture_output=True)
context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(cert, key)
context.set_alpn_protocols(["http/1.1"])


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def serve(client_reader, client_writer):
    try:
        backend_reader, backend_writer = await asyncio.open_connection("127.0.0.1", backend_port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(pipe(client_reader, backend_writer), pipe(backend_reader, client_writer))


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", listen_port, ssl=context)
    open(os.path.join(folder, "ready"), "w").close()
    async with server:
        await server.serve_forever()


asyncio.run(main())
