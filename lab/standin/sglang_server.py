"""Stand-in for an sglang server: the lab's sglang.service runs it, and tests use it on loopback.

It is NOT sglang: it decodes nothing, it only answers in sglang's documented shapes, with
the Python standard library alone (lab hosts have no torch and no GPU; many of them share a
small machine, so it idles in one thread and uses a few MB).

- `POST /generate` (sglang's native API): `{"text", "meta_info": {"id", "finish_reason",
  "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency"}}` (a list when
  `text` is a list); streaming: one `data: {...}` event per token with cumulative text and
  counts, `e2e_latency` on the last, then `data: [DONE]`.
- `POST /v1/chat/completions` (OpenAI): a `chat.completion`, or with `stream` its
  `chat.completion.chunk` events; `GET /v1/models` lists the served model name.
- `GET /metrics` exports `sglang:num_running_reqs` only with `--enable-metrics`, as sglang
  does (else 404); `GET /health` and `/health_generate` answer 200. Like sglang's, these need
  no API key; every other endpoint does when one is set (`--api-key`, or `api-key` in the
  `--config` YAML file, which is how the sglang role's launch script passes it).

Without `ignore_eos` it stops at a pretend EOS after EOS_AFTER tokens, as a real model would
stop early, so a client that forgets `ignore_eos` is caught.

Holding requests in flight, so a drain can be shown to wait for them: `--hold SECONDS` (a
stand-in option) for every request, or a request's own `"hold": SECONDS` field (stand-in
only; sglang has no such field). A request counts in `num_running_reqs` until its answer is
sent.

    python3 sglang_server.py --host 0.0.0.0 --port 30000 --enable-metrics --hold 20
    python3 sglang_server.py <sglang.launch_server options>   # as the lab's venv runs it
"""
from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EOS_AFTER = 3
# Seconds a request may ask to be held (a typo must not park a thread for a day).
MAX_HOLD = 3600.0


class StandinSglang:
    """Serves on `host`:`port` (default 127.0.0.1 at an ephemeral port); refuses requests past
    `max_requests`.

    `token_delay(active)` gives the seconds per decoded token when `active` requests run
    at once (default: no delay), to shape sample data; `hold` the seconds each request stays
    in flight before it decodes (a request's own `hold` field wins).
    """

    def __init__(self, max_requests: int = 100, token_delay=lambda active: 0.0, api_key: str = "",
                 hold: float = 0.0, host: str = "127.0.0.1", port: int = 0, metrics: bool = True,
                 model: str = "standin", poll: float = 0.05):
        self.max_requests = max_requests
        self.metrics = metrics
        self.api_key = api_key  # when set, requests need `Authorization: Bearer <key>` (sglang --api-key)
        self.token_delay = token_delay
        self.hold = hold
        self.model = model
        self.requests = []  # decoded JSON bodies, in arrival order
        self.active = 0
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(poll,), daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def serve(self):
        """Serve in this thread until the process ends (as the lab's unit runs it)."""
        self._thread.run()

    def release(self):
        """End every hold now and from now on (tests: the requests held so far are answered)."""
        self._released.set()

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

    def _held(self, body: dict) -> float:
        hold = body.get("hold", self.hold) if isinstance(body, dict) else self.hold
        return min(max(float(hold), 0.0), MAX_HOLD) if isinstance(hold, (int, float)) else self.hold

    def _decode(self, params: dict):
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

            def _send(self, status, payload: bytes, content_type="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                if self.path == "/metrics" and standin.metrics:
                    payload = ("# HELP sglang:num_running_reqs The number of running requests.\n"
                               "# TYPE sglang:num_running_reqs gauge\n"
                               f'sglang:num_running_reqs{{engine_type="unified",model_name="{standin.model}",'
                               f'pp_rank="0",tp_rank="0"}} {float(standin.active)}\n').encode()
                    self._send(200, payload, "text/plain; version=0.0.4")
                elif self.path in ("/health", "/health_generate"):
                    self._send(200, b"", "text/plain")
                elif self.path == "/v1/models" and self._authorized():
                    self._send(200, json.dumps({"object": "list", "data": [
                        {"id": standin.model, "object": "model", "owned_by": "sglang"}]}).encode())
                elif self.path == "/v1/models":
                    self.send_error(401)
                else:
                    self.send_error(404)

            def _authorized(self):
                return not standin.api_key or self.headers.get("Authorization") == f"Bearer {standin.api_key}"

            def do_POST(self):
                answer = {"/generate": self._generate, "/v1/chat/completions": self._chat}.get(self.path)
                if answer is None:
                    self.send_error(404)
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                except ValueError:
                    self.send_error(400, "body is not JSON")
                    return
                if not self._authorized():
                    self.send_error(401)
                    return
                if not standin._admit(body):
                    self.send_error(503, "stand-in request budget spent")
                    return
                try:
                    standin._released.wait(standin._held(body))
                    answer(body)
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

            def _generate(self, body):
                params = body.get("sampling_params", {})
                if body.get("stream"):
                    started = time.monotonic()
                    self._events((" tok" * count, self._meta(body["text"], params, count, finished, started))
                                 for count, finished in standin._decode(params))
                    return
                prompts = body["text"] if isinstance(body["text"], list) else [body["text"]]
                out = []
                for prompt in prompts:
                    started = time.monotonic()
                    count = max(c for c, _ in standin._decode(params))
                    out.append({"text": " tok" * count, "meta_info": self._meta(prompt, params, count, True, started)})
                self._send(200, json.dumps(out if isinstance(body["text"], list) else out[0]).encode())

            def _events(self, events):
                """Server-sent events, each `data: {json}`, then `data: [DONE]`."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for text, meta in events:
                    event = {"text": text, "meta_info": meta} if meta is not None else text
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

            def _chat(self, body):
                want = body.get("max_completion_tokens", body.get("max_tokens", 16))
                params = {"max_new_tokens": want, "ignore_eos": body.get("ignore_eos", False)}
                prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
                base = {"id": "chatcmpl-" + uuid.uuid4().hex, "created": int(time.time()),
                        "model": body.get("model") or standin.model}
                if body.get("stream"):
                    def chunks():
                        for count, finished in standin._decode(params):
                            choice = {"index": 0, "delta": {"content": " tok"},
                                      "finish_reason": ("length" if count == want else "stop") if finished else None}
                            yield dict(base, object="chat.completion.chunk", choices=[choice]), None
                    self._events(chunks())
                    return
                count = max(c for c, _ in standin._decode(params))
                self._send(200, json.dumps(dict(
                    base, object="chat.completion",
                    choices=[{"index": 0, "message": {"role": "assistant", "content": " tok" * count},
                              "finish_reason": "length" if count == want else "stop"}],
                    usage={"prompt_tokens": len(prompt.split()), "completion_tokens": count,
                           "total_tokens": len(prompt.split()) + count})).encode())

        return Handler


def _config_api_key(path):
    """The api-key of an sglang --config YAML file (the launch script writes `api-key: '...'`)."""
    for line in open(path, encoding="utf-8"):
        key, _, value = line.partition(":")
        if key.strip() == "api-key":
            value = value.strip()
            return value[1:-1].replace("''", "'") if value.startswith("'") else value
    return ""


def main(argv=None):
    # Takes sglang.launch_server's own command line: the options it does not model are
    # printed (the launch script sends them to the server log) and otherwise ignored.
    cli = argparse.ArgumentParser(description="sglang stand-in (lab and tests only)", allow_abbrev=False)
    cli.add_argument("--host", default="127.0.0.1")
    cli.add_argument("--port", type=int, default=30000)
    cli.add_argument("--served-model-name")
    cli.add_argument("--model-path", default="standin")
    cli.add_argument("--api-key", default="")
    cli.add_argument("--config", help="sglang --config YAML file; only its api-key is read")
    cli.add_argument("--enable-metrics", action="store_true", help="serve /metrics, as sglang does with it")
    cli.add_argument("--hold", type=float, default=0.0, help="stand-in only: seconds each request stays in flight")
    args, others = cli.parse_known_args(argv)
    api_key = _config_api_key(args.config) if args.config else args.api_key
    server = StandinSglang(max_requests=10**9, api_key=api_key, hold=args.hold, host=args.host, port=args.port,
                           metrics=args.enable_metrics, model=args.served_model_name or args.model_path,
                           poll=3600)  # killed, never shut down: no need to wake up to check
    print(f"sglang stand-in serving on {server.url}; sglang options not modelled: {' '.join(others)}", flush=True)
    server.serve()


if __name__ == "__main__":
    main()
