"""The app the preview tests run inside a sandbox, on 127.0.0.1:8000 (standard library
only): /headers answers the request's headers as JSON, /peer the port its client
connected from, /echo answers a POST's body,
/cookie sets a cookie for `/`, /events sends two server-sent events a second apart,
/big?mib=N sends N MiB, /ws is a WebSocket that echoes text messages."""

import base64
import hashlib
import json
import struct
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class App(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go in two writes: without this, the body waits on the client's
    # delayed acknowledgement of the headers (about 40 ms).
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def answer(self, status, body, kind="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/headers":
            seen = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
            return self.answer(200, json.dumps(seen).encode())
        if url.path == "/peer":
            return self.answer(200, str(self.client_address[1]).encode(), "text/plain")
        if url.path == "/cookie":
            return self.answer(200, b"{}", extra=[("Set-Cookie", "app=1; Path=/; HttpOnly")])
        if url.path == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for n in (1, 2):
                self.wfile.write(f"data: {n}\n\n".encode())
                self.wfile.flush()
                time.sleep(1)
            self.close_connection = True
            return None
        if url.path == "/big":
            mib = int(parse_qs(url.query).get("mib", ["1"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(mib << 20))
            self.end_headers()
            block = bytes(range(256)) * 4096
            for _ in range(mib):
                self.wfile.write(block)
            return None
        if url.path == "/origin-wide":
            return self.answer(200, b"{}", extra=[
                ("Clear-Site-Data", '"cookies", "storage"'),
                ("NEL", '{"report_to": "x", "max_age": 86400}'),
                ("Report-To", '{"group": "x", "max_age": 86400, "endpoints": [{"url": "https://evil.example"}]}'),
                ("Reporting-Endpoints", 'x="https://evil.example"'),
                ("Strict-Transport-Security", "max-age=31536000; includeSubDomains"),
                ("Alt-Svc", 'h2="evil.example:443"'),
            ])
        if url.path == "/ws":
            return self.websocket()
        return self.answer(200, b"hello from inside\n", "text/plain")

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        return self.answer(200, body, "application/octet-stream")

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack(">H", self.rfile.read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            if opcode == 8:
                self.wfile.write(b"\x88\x00")
                return
            if opcode == 1:
                out = b"echo: " + data
                if len(out) < 126:
                    self.wfile.write(bytes([0x81, len(out)]) + out)
                else:
                    self.wfile.write(bytes([0x81, 126]) + struct.pack(">H", len(out)) + out)
                self.wfile.flush()


ThreadingHTTPServer.daemon_threads = True
# A hundred clients may connect at once.
ThreadingHTTPServer.request_queue_size = 128
ThreadingHTTPServer(("127.0.0.1", 8000), App).serve_forever()
