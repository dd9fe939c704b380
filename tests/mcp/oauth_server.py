"""An MCP server that needs OAuth sign-in, with its own authorization server, on 127.0.0.1.

Python standard library only. Usage: oauth_server.py PORT; prints READY once listening
(PORT 0: a free port, printed as READY PORT).

- MCP (Streamable HTTP, JSON answers) at /mcp: `initialize`, `tools/list`, `tools/call` (one
  tool, `echo`); `server/discover` is "method not found", so clients use `initialize`. Every
  POST needs a valid access token, else 401 with a `resource_metadata` challenge.
- Protected resource metadata at /.well-known/oauth-protected-resource/mcp; authorization
  server metadata at /.well-known/oauth-authorization-server; dynamic registration at
  /register; /authorize redirects at once (the "person" always agrees) with code, state and
  iss; /token does authorization_code (PKCE S256 checked, resource and redirect_uri checked)
  and refresh_token.
- Test controls: POST /control/expire makes every access token issued so far invalid (a
  server-side expiry), GET /control/log answers what happened, with every token issued, so a
  test can look for them where they must not be.
"""

import base64
import hashlib
import json
import secrets
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

import socket

PORT = int(sys.argv[1])
if PORT == 0:
    _probe = socket.socket()
    _probe.bind(("127.0.0.1", 0))
    PORT = _probe.getsockname()[1]
    _probe.close()
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"
LOCK = threading.Lock()
STATE = {
    "clients": {},
    "codes": {},
    "access": set(),
    "refresh": set(),
    "issued": [],
    "authorizations": 0,
    "code_grants": 0,
    "refreshes": 0,
    "registrations": 0,
    "mcp_with_token": 0,
    "errors": [],
}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def fail(self, why):
        with LOCK:
            STATE["errors"].append(why)
        self.send_json(400, {"error": "invalid_request", "error_description": why})

    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/.well-known/oauth-protected-resource/mcp":
            return self.send_json(200, {
                "resource": RESOURCE,
                "authorization_servers": [BASE],
                "scopes_supported": ["mcp:tools"],
            })
        if url.path == "/.well-known/oauth-authorization-server":
            return self.send_json(200, {
                "issuer": BASE,
                "authorization_endpoint": f"{BASE}/authorize",
                "token_endpoint": f"{BASE}/token",
                "registration_endpoint": f"{BASE}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["mcp:tools", "offline_access"],
                "authorization_response_iss_parameter_supported": True,
            })
        if url.path == "/authorize":
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            with LOCK:
                client = STATE["clients"].get(q.get("client_id"))
            if not client or q.get("redirect_uri") not in client["redirect_uris"]:
                return self.fail("unknown client or redirect_uri")
            if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
                return self.fail("PKCE S256 required")
            if q.get("resource") != RESOURCE:
                return self.fail("wrong resource")
            code = secrets.token_urlsafe(16)
            with LOCK:
                STATE["authorizations"] += 1
                STATE["codes"][code] = q
            back = q["redirect_uri"] + "?" + urlencode(
                {"code": code, "state": q.get("state", ""), "iss": BASE})
            self.send_response(302)
            self.send_header("Location", back)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if url.path == "/control/log":
            with LOCK:
                log = {k: v for k, v in STATE.items() if k in (
                    "issued", "authorizations", "code_grants", "refreshes",
                    "registrations", "mcp_with_token", "errors")}
            return self.send_json(200, log)
        if url.path == "/mcp":
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_json(404, {"error": "not found"})

    def do_DELETE(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def issue(self, scope):
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        with LOCK:
            STATE["access"].add(access)
            STATE["refresh"].add(refresh)
            STATE["issued"] += [access, refresh]
        body = {"access_token": access, "token_type": "Bearer", "expires_in": 3600,
                "refresh_token": refresh}
        if scope:
            body["scope"] = scope
        self.send_json(200, body)

    def do_POST(self):
        url = urlparse(self.path)
        raw = self.body()
        if url.path == "/register":
            meta = json.loads(raw or b"{}")
            client_id = "client-" + secrets.token_hex(6)
            with LOCK:
                STATE["registrations"] += 1
                STATE["clients"][client_id] = {"redirect_uris": meta.get("redirect_uris", [])}
            return self.send_json(201, {"client_id": client_id,
                                        "redirect_uris": meta.get("redirect_uris", []),
                                        "token_endpoint_auth_method": "none"})
        if url.path == "/token":
            form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
            if form.get("resource") != RESOURCE:
                return self.fail("wrong resource")
            grant = form.get("grant_type")
            if grant == "authorization_code":
                with LOCK:
                    req = STATE["codes"].pop(form.get("code"), None)
                if req is None or req.get("redirect_uri") != form.get("redirect_uri"):
                    return self.send_json(400, {"error": "invalid_grant"})
                verifier = form.get("code_verifier", "")
                if b64url(hashlib.sha256(verifier.encode()).digest()) != req["code_challenge"]:
                    return self.send_json(400, {"error": "invalid_grant",
                                                "error_description": "PKCE mismatch"})
                with LOCK:
                    STATE["code_grants"] += 1
                return self.issue(req.get("scope"))
            if grant == "refresh_token":
                with LOCK:
                    ok = form.get("refresh_token") in STATE["refresh"]
                    if ok:
                        STATE["refresh"].discard(form["refresh_token"])
                        STATE["refreshes"] += 1
                if not ok:
                    return self.send_json(400, {"error": "invalid_grant"})
                return self.issue(None)
            return self.send_json(400, {"error": "unsupported_grant_type"})
        if url.path == "/control/expire":
            with LOCK:
                STATE["access"].clear()
            return self.send_json(200, {})
        if url.path != "/mcp":
            return self.send_json(404, {"error": "not found"})
        auth = self.headers.get("Authorization", "")
        with LOCK:
            valid = auth.startswith("Bearer ") and auth[7:] in STATE["access"]
            if valid:
                STATE["mcp_with_token"] += 1
        if not valid:
            challenge = (f'Bearer error="invalid_token", scope="mcp:tools", '
                         f'resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"')
            return self.send_json(401, {"error": "invalid_token"},
                                  {"WWW-Authenticate": challenge})
        msg = json.loads(raw or b"{}")
        if "id" not in msg:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        method, mid = msg.get("method"), msg["id"]
        if method == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "oauth-test", "version": "1.0.0"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "echo", "description": "Echoes its message.",
                                 "inputSchema": {"type": "object", "properties": {
                                     "message": {"type": "string"}}, "required": ["message"]}}]}
        elif method == "tools/call":
            text = msg.get("params", {}).get("arguments", {}).get("message", "")
            result = {"content": [{"type": "text", "text": f"echo: {text}"}]}
        elif method == "ping":
            result = {}
        else:
            return self.send_json(200, {"jsonrpc": "2.0", "id": mid, "error": {
                "code": -32601, "message": f"Method not found: {method}"}})
        self.send_json(200, {"jsonrpc": "2.0", "id": mid, "result": result})


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print("READY" if sys.argv[1] != "0" else f"READY {PORT}", flush=True)
server.serve_forever()
