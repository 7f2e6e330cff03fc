"""A Partner Platform webhook receiver on Python's standard library (http.server).

Run:  WEBHOOK_SECRET=... PORT=8080 python3 receiver.py
It verifies X-Service-Signature over the raw body bytes before parsing anything, answers 204 at once,
and hands each new event (deduplicated by its id) to a worker thread.
"""
import hashlib
import hmac
import json
import os
import queue
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# docs:verify:start
SIGNATURE = re.compile(r"[0-9a-f]{64}")


def verify(body: bytes, header: str | None, secret: str) -> str | None:
    """Returns None when `header` signs the raw `body`, else why not."""
    if not secret:  # an unset secret would make anyone's signature valid
        return "missing-secret"
    if not header:
        return "missing-signature"
    if not SIGNATURE.fullmatch(header):  # 64 lowercase hex digits, no "sha256=" prefix
        return "malformed-signature"
    expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, header):  # constant time
        return "signature-mismatch"
    return None
# docs:verify:end


MAX_BYTES = 1024 * 1024
SECRET = os.environ.get("WEBHOOK_SECRET", "")
seen: set[str] = set()  # use your database (a unique key on the event id) in production
seen_lock = threading.Lock()
events: "queue.Queue[dict]" = queue.Queue()


def work() -> None:
    while True:
        event = events.get()
        print(f"received {event.get('event')} {event['id']}", file=sys.stderr)  # your handling here


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        if self.path != "/webhooks/partner-platform":
            return self.answer(404, "Not found")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BYTES:
            return self.answer(413, "Payload too large")
        # docs:raw-body:start
        body = self.rfile.read(length)  # the exact bytes received
        # Every line of the header, joined as HTTP reads them (RFC 9110 §5.3): two signatures are none.
        signature = ", ".join(self.headers.get_all("X-Service-Signature", [])) or None
        problem = verify(body, signature, SECRET)
        # docs:raw-body:end
        if problem:
            return self.answer(401, "Invalid signature", problem)
        try:
            event = json.loads(body)
        except ValueError:
            event = None
        if not isinstance(event, dict) or not isinstance(event.get("id"), str):
            return self.answer(400, "Invalid event", "not a JSON object with an id")
        with seen_lock:
            duplicate = event["id"] in seen
            seen.add(event["id"])
        if not duplicate:  # a retry of a handled event is acknowledged again, and ignored
            events.put(event)
        self.send_response(204)
        self.end_headers()

    def answer(self, status: int, title: str, detail: str = "") -> None:
        body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/problem+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def check_vectors() -> None:
    """Used by the package's tests: one line per vector on stdin (id, then base64 secret, body and
    header, "-" for no header), one line "id<TAB>valid|reason" out."""
    from base64 import b64decode

    for line in sys.stdin.read().splitlines():
        vid, secret, body, header = line.split("\t")
        result = verify(b64decode(body), None if header == "-" else b64decode(header).decode(), b64decode(secret).decode())
        print(f"{vid}\t{result or 'valid'}")


if __name__ == "__main__":
    if sys.argv[1:] == ["vectors"]:
        check_vectors()
        sys.exit(0)
    if not SECRET:
        sys.exit("receiver.py: set WEBHOOK_SECRET to the webhook's secret")
    threading.Thread(target=work, daemon=True).start()
    server = ThreadingHTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8080"))), Handler)
    print(f"listening on http://{server.server_address[0]}:{server.server_address[1]}/webhooks/partner-platform", flush=True)
    server.serve_forever()
