"""A Partner Platform webhook receiver on Flask.

Run:  WEBHOOK_SECRET=... PORT=8080 python3 flask_receiver.py   (or any WSGI server: flask_receiver:app)
request.get_data() gives the exact bytes received; verify those, never json.dumps(request.json).
"""
import hashlib
import hmac
import os
import queue
import re
import sys
import threading

from flask import Flask, request

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


SECRET = os.environ.get("WEBHOOK_SECRET", "")
# Checked here, not only when run as a script: a WSGI server imports the module.
if not SECRET and sys.argv[1:] != ["vectors"]:
    sys.exit("flask_receiver.py: set WEBHOOK_SECRET to the webhook's secret")

app = Flask(__name__)
app.config["MAX_CONTENT_LENGTH"] = 1024 * 1024  # larger bodies get 413
seen: set[str] = set()  # use your database (a unique key on the event id) in production
seen_lock = threading.Lock()
events: "queue.Queue[dict]" = queue.Queue()


def problem(status: int, title: str, detail: str = ""):
    return {"type": "about:blank", "title": title, "status": status, "detail": detail}, status, {"Content-Type": "application/problem+json"}


@app.post("/webhooks/partner-platform")
def webhook():
    # docs:raw-body:start
    body = request.get_data()  # the exact bytes received; not request.json
    reason = verify(body, request.headers.get("X-Service-Signature"), SECRET)
    # docs:raw-body:end
    if reason:
        return problem(401, "Invalid signature", reason)
    event = request.get_json(silent=True)  # parsed from the same bytes, after verifying
    if not isinstance(event, dict) or not isinstance(event.get("id"), str):
        return problem(400, "Invalid event", "not a JSON object with an id")
    with seen_lock:
        duplicate = event["id"] in seen
        seen.add(event["id"])
    if not duplicate:  # a retry of a handled event is acknowledged again, and ignored
        events.put(event)
    return "", 204


def work() -> None:
    while True:
        event = events.get()
        print(f"received {event.get('event')} {event['id']}", file=sys.stderr)  # your handling here


def check_vectors() -> None:
    """Used by the package's tests: one line per vector on stdin (id, then base64 secret, body and
    header, "-" for no header), one line "id<TAB>valid|reason" out."""
    from base64 import b64decode

    for line in sys.stdin.read().splitlines():
        vid, secret, body, header = line.split("\t")
        result = verify(b64decode(body), None if header == "-" else b64decode(header).decode(), b64decode(secret).decode())
        print(f"{vid}\t{result or 'valid'}")


threading.Thread(target=work, daemon=True).start()

if __name__ == "__main__":
    if sys.argv[1:] == ["vectors"]:
        check_vectors()
        sys.exit(0)
    port = int(os.environ.get("PORT", "8080"))
    print(f"listening on http://127.0.0.1:{port}/webhooks/partner-platform", flush=True)
    app.run(host=os.environ.get("HOST", "127.0.0.1"), port=port, threaded=True)
