"""The parts of the client that do not need the server's present version:
the SSE parser, the tail's cursor, the fields the server is about to gain
(``next_start_seq``, record headers), bearer tokens and TLS options.
Answers come from httpx.MockTransport or a local TLS server, so each case
is exact and each request can be inspected."""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List

import httpx
import pytest

import fencelog
from fencelog._wire import SseParser, TailState


def events(chunks: List[bytes]) -> List[tuple]:
    p = SseParser()
    out = []
    for c in chunks:
        out += [(e.event, e.data, e.id) for e in p.feed(c)]
    return out


def test_sse_parser_handles_every_line_ending_and_split() -> None:
    stream = b'event: records\r\nid: 3\r\ndata: [1,\r\ndata: 2]\r\n\r\n: comment\n\nevent: ping\rdata: {}\r\r'
    expected = [("records", "[1,\n2]", "3"), ("ping", "{}", "3")]
    assert events([stream]) == expected
    # The same bytes cut at every position, including between CR and LF.
    for cut in range(1, len(stream)):
        assert events([stream[:cut], stream[cut:]]) == expected, cut
    # One byte at a time, with a UTF-8 character split across chunks.
    text = "event: records\ndata: ünï\n\n".encode()
    assert events([bytes([b]) for b in text]) == [("records", "ünï", None)]


def _records_event(seqs: List[int], next_id: int) -> bytes:
    data = json.dumps([{"seq": s, "fencing_token": 1, "timestamp_ms": 0, "body": f"r{s}"} for s in seqs])
    return f"event: records\nid: {next_id}\ndata: {data}\n\n".encode()


def test_tail_state_skips_repeats_and_refuses_gaps() -> None:
    st = TailState("s", 0, events=True)
    assert [r.seq for r in st.feed(_records_event([0, 1], 2))] == [0, 1]
    # A resumed connection may repeat what was delivered: dropped.
    st.new_connection()
    assert [r.seq for r in st.feed(_records_event([1, 2], 3))] == [2]
    assert st.request_headers() == {"Accept": "text/event-stream", "Last-Event-ID": "3"}
    assert st.request_params() == {"start_seq": "3"}
    assert st.feed(b'event: caught_up\nid: 3\ndata: {"next_seq":3}\n\n') == [fencelog.CaughtUp(3)]
    with pytest.raises(fencelog.ProtocolError, match="skipped from seq 3 to 5"):
        st.feed(_records_event([5], 6))


def test_tail_error_event_raises_the_typed_error() -> None:
    st = TailState("s", 0, events=False)
    with pytest.raises(fencelog.Corrupt) as info:
        st.feed(b'event: error\ndata: {"error":"corrupt","message":"bad frame"}\n\n')
    assert info.value.body == {"error": "corrupt", "message": "bad frame"}


def mock(handler) -> fencelog.Client:
    return fencelog.Client("http://fencelog.test", transport=httpx.MockTransport(handler))


def test_paging_follows_next_start_seq_when_the_server_sends_it() -> None:
    # A server that says where the next page starts (here: past a record it
    # chose not to return). The client must follow it, and never next_seq.
    pages: Dict[str, Dict[str, Any]] = {
        "0": {"records": [{"seq": 0, "fencing_token": 1, "timestamp_ms": 5, "body": "a"}], "next_seq": 100, "next_start_seq": 2},
        "2": {"records": [{"seq": 2, "fencing_token": 1, "timestamp_ms": 5, "body": "c"}], "next_seq": 100, "next_start_seq": 3},
        "3": {"records": [], "next_seq": 100, "next_start_seq": 3},
    }
    asked = []

    def handler(req: httpx.Request) -> httpx.Response:
        start = req.url.params["start_seq"]
        asked.append(start)
        return httpx.Response(200, json=pages[start])

    with mock(handler) as c:
        assert [r.body for r in c.iter_records("s")] == [b"a", b"c"]
    assert asked == ["0", "2", "3"]


def test_paging_without_next_start_seq_uses_the_last_record() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        start = int(req.url.params["start_seq"])
        recs = [{"seq": s, "fencing_token": 1, "timestamp_ms": 0, "body": str(s)} for s in range(start, min(start + 2, 5))]
        return httpx.Response(200, json={"records": recs, "next_seq": 5})

    with mock(handler) as c:
        assert [r.seq for r in c.iter_records("s")] == [0, 1, 2, 3, 4]
        assert c.read("s", 4).next_start_seq == 5


def test_a_continuation_that_goes_back_is_refused() -> None:
    body = {"records": [{"seq": 4, "fencing_token": 1, "timestamp_ms": 0, "body": "x"}], "next_seq": 9, "next_start_seq": 4}
    with mock(lambda req: httpx.Response(200, json=body)) as c:
        with pytest.raises(fencelog.ProtocolError, match="would re-read"):
            c.read("s", 4)


def test_record_headers_are_exposed_as_bytes() -> None:
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    rec = {
        "seq": 0, "fencing_token": 1, "timestamp_ms": 0, "body_base64": b64(b"\x00\x01"),
        "headers": [["trace-id", "abc"], {"name": "bin", "value_base64": b64(b"\xff")}],
        "headers_base64": [[b64(b"k\xfe"), b64(b"v\xfd")]],
    }
    with mock(lambda req: httpx.Response(200, json={"records": [rec], "next_seq": 1})) as c:
        r = c.read("s").records[0]
    assert r.body == b"\x00\x01"
    assert r.headers == ((b"trace-id", b"abc"), (b"bin", b"\xff"), (b"k\xfe", b"v\xfd"))


def test_bearer_token_and_request_shapes() -> None:
    seen: List[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        if req.url.path.endswith("/fence"):
            return httpx.Response(200, json={"stream": "s", "first_seq": 0, "next_seq": 0, "highest_token": 9, "last_timestamp_ms": 0})
        return httpx.Response(200, json={"stream": "s", "first_seq": 0, "last_seq": 1, "next_seq": 2, "fencing_token": 9, "timestamp_ms": 0})

    with fencelog.Client("http://fencelog.test/", token="s3cret", transport=httpx.MockTransport(handler)) as c:
        c.append("s", 9, ["ab", b"\x00"], match_seq_num=0)
        c.fence("s", 9)
    append, fence = seen
    assert append.headers["authorization"] == "Bearer s3cret"
    assert (append.headers["fencing-token"], append.headers["match-seq-num"]) == ("9", "0")
    assert append.headers["content-type"] == "application/vnd.fencelog.batch"
    assert append.content == b"\x02\x00\x00\x00ab\x01\x00\x00\x00\x00"
    assert fence.headers["authorization"] == "Bearer s3cret"
    assert fence.content == b'{"fencing_token":9}'


def test_error_bodies_that_are_not_fencelog_errors() -> None:
    answers = iter([
        httpx.Response(502, text="<html>Bad Gateway</html>"),
        httpx.Response(409, json={"error": "stale_fencing_token", "message": "no fields"}),
        httpx.Response(429, json={"error": "overloaded", "message": "later", "retry_after_ms": 50}),
        httpx.Response(401, json={"error": "unauthenticated", "message": "who are you"}),
    ])
    with mock(lambda req: next(answers)) as c:
        with pytest.raises(fencelog.ApiError) as proxy:
            c.append("s", 1, "a")
        assert (type(proxy.value), proxy.value.status, proxy.value.code) == (fencelog.ApiError, 502, None)
        assert proxy.value.raw == b"<html>Bad Gateway</html>"
        # A code whose documented fields are missing breaks the contract.
        with pytest.raises(fencelog.ProtocolError, match="'stream' field"):
            c.append("s", 1, "a")
        # Codes this client does not know keep their code and body.
        with pytest.raises(fencelog.ApiError) as unknown:
            c.append("s", 1, "a")
        assert (unknown.value.code, unknown.value.body["retry_after_ms"]) == ("overloaded", 50)
        with pytest.raises(fencelog.Unauthenticated):
            c.append("s", 1, "a")


def test_inputs_are_checked_before_sending() -> None:
    with mock(lambda req: pytest.fail("nothing may be sent")) as c:
        with pytest.raises(TypeError):
            c.append("s", "41", "a")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            c.append("s", True, "a")
        with pytest.raises(TypeError):
            c.append("s", 1, [1, 2])  # type: ignore[list-item]
        with pytest.raises(ValueError):
            c.state("")


class _TlsHandler(http.server.BaseHTTPRequestHandler):
    auth: List[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        _TlsHandler.auth.append(self.headers.get("Authorization", ""))
        body = json.dumps({
            "stream": "s", "first_seq": 0, "next_seq": 0, "highest_token": 1, "last_timestamp_ms": 0,
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_tls_with_a_private_ca(tmp_path: Path) -> None:
    # The server does not speak TLS yet; this checks the client's half
    # (https URLs, ca_cert, verify) against a local TLS endpoint.
    ca_key, ca, key, csr, cert = (tmp_path / n for n in ("ca.key", "ca.pem", "srv.key", "srv.csr", "srv.pem"))
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "1", "-subj", "/CN=test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", "1", "-extfile", str(ext))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TlsHandler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{httpd.server_address[1]}"
    try:
        with fencelog.Client(url, ca_cert=ca, token="t0ken") as c:
            assert c.state("s").highest_token == 1
        assert _TlsHandler.auth == ["Bearer t0ken"]
        # Without the CA the certificate is not trusted, and nothing was sent.
        with fencelog.Client(url) as c:
            with pytest.raises(fencelog.ConnectionFailed):
                c.append("s", 1, "a")
        with fencelog.Client(url, verify=False) as c:
            assert c.state("s").stream == "s"
        with pytest.raises(ValueError):
            fencelog.Client(url, ca_cert=ca, verify=False)
    finally:
        httpd.shutdown()
        httpd.server_close()
