"""Stand-in for sglang's `POST /generate`, for tests and sample data only.

It is NOT sglang: it decodes nothing, it only answers in sglang's documented shape so the
benchmark client can be exercised on loopback. Non-streaming: `{"text", "meta_info":
{"id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens",
"e2e_latency"}}` (a list when `text` is a list). Streaming: one `data: {...}` event per
token with cumulative text and counts, `e2e_latency` on the last, then `data: [DONE]`.

Without `ignore_eos` it stops at a pretend EOS after EOS_AFTER tokens, as a real model
would stop early, so a client that forgets `ignore_eos` is caught.

`GET /metrics` exports `sglang:num_running_reqs` as sglang does with `--enable-metrics`, and
`hold` keeps each request in flight that many seconds, so a drain can be shown to wait for
it. `/health`, `/health_generate` answer 200; like sglang's, they and /metrics need no API key.
`metrics=False` (--no-metrics) answers /metrics with 404, as sglang does without the flag.

    python3 standin_sglang.py --host 0.0.0.0 --port 30000 --hold 20   # serve until killed
    python3 standin_sglang.py <sglang.launch_server options>          # as the launch script runs it
"""
from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EOS_AFTER = 3


class StandinSglang:
    """Serves on 127.0.0.1 at an ephemeral port; refuses requests past `max_requests`.

    `token_delay(active)` gives the seconds per decoded token when `active` requests run
    at once (default: no delay), to shape sample data; `hold` the seconds each request stays
    in flight before it decodes.
    """

    def __init__(self, max_requests: int = 100, token_delay=lambda active: 0.0, api_key: str = "",
                 hold: float = 0.0, host: str = "127.0.0.1", port: int = 0, metrics: bool = True):
        self.max_requests = max_requests
        self.metrics = metrics
        self.api_key = api_key  # when set, requests need `Authorization: Bearer <key>` (sglang --api-key)
        self.token_delay = token_delay
        self.hold = hold
        self.requests = []  # decoded JSON bodies, in arrival order
        self.active = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _admit(self, body: dict) -> bool:
        with self._lock:
            if len(self.requests) >= self.max_requests:
                return False
            self.requests.append(body)
            self.active += 1
            return True

    def _done(self):
        with self._lock:
            self.active -= 1

    def _decode(self, prompt: str, params: dict):
        """Yield (token_count, finished) as tokens are 'decoded'."""
        want = params.get("max_new_tokens", 16)
        n = want if params.get("ignore_eos") else min(want, EOS_AFTER)
        for i in range(1, n + 1):
            time.sleep(self.token_delay(self.active))
            yield i, i == n

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/metrics" and standin.metrics:
                    payload = ("# HELP sglang:num_running_reqs The number of running requests.\n"
                               "# TYPE sglang:num_running_reqs gauge\n"
                               'sglang:num_running_reqs{engine_type="unified",model_name="standin",'
                               f'pp_rank="0",tp_rank="0"}} {float(standin.active)}\n').encode()
                elif self.path in ("/health", "/health_generate"):
                    payload = b""
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self):
                if self.path != "/generate":
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if standin.api_key and self.headers.get("Authorization") != f"Bearer {standin.api_key}":
                    self.send_error(401)
                    return
                if not standin._admit(body):
                    self.send_error(503, "stand-in request budget spent")
                    return
                try:
                    time.sleep(standin.hold)
                    if body.get("stream"):
                        self._stream(body)
                    else:
                        self._plain(body)
                finally:
                    standin._done()

            def _meta(self, prompt, params, count, finished, started):
                want = params.get("max_new_tokens", 16)
                meta = {"id": uuid.uuid4().hex, "prompt_tokens": len(prompt.split()),
                        "completion_tokens": count, "cached_tokens": 0, "finish_reason": None}
                if finished:
                    meta["finish_reason"] = ({"type": "length", "length": want} if count == want
                                             else {"type": "stop", "matched": 2})
                    meta["e2e_latency"] = time.monotonic() - started
                return meta

            def _plain(self, body):
                prompts = body["text"] if isinstance(body["text"], list) else [body["text"]]
                out = []
                for prompt in prompts:
                    started = time.monotonic()
                    count = max(c for c, _ in standin._decode(prompt, body["sampling_params"]))
                    out.append({"text": " tok" * count,
                                "meta_info": self._meta(prompt, body["sampling_params"], count, True, started)})
                payload = json.dumps(out if isinstance(body["text"], list) else out[0]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, body):
                started = time.monotonic()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for count, finished in standin._decode(body["text"], body["sampling_params"]):
                    event = {"text": " tok" * count,
                             "meta_info": self._meta(body["text"], body["sampling_params"], count,
                                                     finished, started)}
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

        return Handler


def _config_api_key(path):
    """The api-key of an sglang --config YAML file (the launch script writes `api-key: '...'`)."""
    for line in open(path, encoding="utf-8"):
        key, _, value = line.partition(":")
        if key.strip() == "api-key":
            value = value.strip()
            return value[1:-1].replace("''", "'") if value.startswith("'") else value
    return ""


if __name__ == "__main__":
    # Also takes sglang.launch_server's own command line: the options it does not model
    # are printed (the launch script sends them to the server log) and otherwise ignored.
    cli = argparse.ArgumentParser(description="sglang stand-in (tests only)", allow_abbrev=False)
    cli.add_argument("--host", default="127.0.0.1")
    cli.add_argument("--port", type=int, default=30000)
    cli.add_argument("--hold", type=float, default=0.0, help="seconds each request stays in flight")
    cli.add_argument("--api-key", default="")
    cli.add_argument("--config", help="sglang --config YAML file; only its api-key is read")
    cli.add_argument("--no-metrics", action="store_true", help="answer /metrics with 404 (no --enable-metrics)")
    args, others = cli.parse_known_args()
    api_key = _config_api_key(args.config) if args.config else args.api_key
    with StandinSglang(max_requests=10**9, api_key=api_key, hold=args.hold, host=args.host,
                       port=args.port, metrics=not args.no_metrics) as server:
        print(f"serving on {server.url}; sglang options not modelled: {' '.join(others)}", flush=True)
        threading.Event().wait()
