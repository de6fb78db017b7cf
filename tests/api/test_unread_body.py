"""A response that leaves the request body unread closes the connection (routes/unread_body.py):
a client reusing a kept-alive connection must never send its next request into a connection
the server is about to drop (CI saw "Server disconnected without sending a response" right
after a 404 to a 1.4 MB POST)."""

from __future__ import annotations

import socket
import time

import httpx

BIG = b'{"dashboard":{"title":"x","panels":[' + b"1," * 700_000 + b'1]}}'


def _exchange(port: int, request: bytes) -> tuple[bytes, bytes]:
    """Send one request on a fresh connection; the response head, and whatever the server
    sent after it until it closed the connection or went quiet for 5 s."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        head, _, rest = received.partition(b"\r\n\r\n")
        try:
            while chunk := sock.recv(65536):
                rest += chunk
            rest += b"<closed>"
        except (TimeoutError, socket.timeout):
            rest += b"<open>"
        except ConnectionResetError:
            rest += b"<closed>"
        return head.lower(), rest


def _post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n" + extra +
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def test_a_404_to_an_unread_body_says_close_and_closes(make_server):
    server = make_server()
    head, rest = _exchange(server.port, _post("/api/dashboards/import", BIG))
    assert head.startswith(b"http/1.1 404"), head
    assert b"\r\nconnection: close" in head, head
    assert rest.endswith(b"<closed>"), rest[-40:]


def test_a_read_body_keeps_the_connection(make_server):
    server = make_server()
    ts = str(time.time_ns()).encode()
    body = b'{"streams":[{"stream":{"app":"a"},"values":[["' + ts + b'","x"]]}]}'
    head, rest = _exchange(server.port, _post("/loki/api/v1/push", body))
    assert head.startswith(b"http/1.1 204"), head
    assert b"connection: close" not in head, head
    assert rest.endswith(b"<open>"), rest[-40:]


def test_a_client_reusing_its_connection_after_a_404_gets_every_answer(make_server):
    server = make_server()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for _ in range(5):
            assert client.post("/api/dashboards/import", content=BIG).status_code == 404
            assert client.get("/ready").status_code == 200
