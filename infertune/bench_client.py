"""Decode benchmark against sglang's native HTTP API (`POST /generate`).

Each request asks for exactly `max_new_tokens` (`ignore_eos`), so every trial decodes the
same number of tokens. With streaming (the default) the client times the server-sent
events: time to first token, then the decode time per token between the first and the
last chunk; the final chunk's `meta_info` gives the token counts and the server's own
`e2e_latency`. A batch of B is B concurrent requests, which sglang batches together.

    python -m infertune.bench_client --url http://127.0.0.1:30000 --backend cutlass \\
        --batch 1,8,64 --trials 5 --out cutlass.json [--api-key-file FILE|-]

sglang's API key comes from a file only its owner can read, or from standard input
(`--api-key-file -`): never from the command line or the environment, which other users of
the host can read (ps, /proc/PID/environ) and Ansible would print at -vvv.
"""
from __future__ import annotations

import argparse
import json
import os
import stat
import statistics
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from http.client import HTTPConnection, HTTPSConnection

DEFAULT_PROMPT = "Write a long story about a lighthouse keeper and the sea."


def summary(values: list) -> dict:
    """Median and p90 (linear interpolation between order statistics) of a sample."""
    ordered = sorted(values)
    p90 = statistics.quantiles(ordered, n=10, method="inclusive")[8] if len(ordered) > 1 else ordered[0]
    return {"median": statistics.median(ordered), "p90": p90,
            "min": ordered[0], "max": ordered[-1], "n": len(ordered)}


class Client:
    def __init__(self, url: str, timeout: float = 600.0, clock=time.perf_counter, api_key: str = ""):
        u = urllib.parse.urlsplit(url)
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname, u.port or (443 if self.https else 80)
        self.path = u.path.rstrip("/") + "/generate"
        self.timeout = timeout
        self.clock = clock

    def _post(self, payload: dict):
        conn = (HTTPSConnection if self.https else HTTPConnection)(self.host, self.port, timeout=self.timeout)
        conn.request("POST", self.path, body=json.dumps(payload), headers=self.headers)
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"/generate answered {resp.status}: {resp.read()[:300]!r}")
        return conn, resp

    @staticmethod
    def _payload(prompt: str, max_new_tokens: int, stream: bool) -> dict:
        return {"text": prompt, "stream": stream,
                "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True,
                                    "temperature": 0}}

    def generate(self, prompt: str, max_new_tokens: int) -> dict:
        """One request without streaming: tokens and latency from `meta_info`."""
        start = self.clock()
        conn, resp = self._post(self._payload(prompt, max_new_tokens, False))
        try:
            meta = json.loads(resp.read())["meta_info"]
        finally:
            conn.close()
        wall = self.clock() - start
        return _checked(meta, max_new_tokens, {
            "wall_s": wall,
            "ms_per_token": 1e3 * meta["e2e_latency"] / meta["completion_tokens"],
        })

    def generate_stream(self, prompt: str, max_new_tokens: int) -> dict:
        """One streamed request: `data: {...}` events, each carrying cumulative
        `meta_info.completion_tokens`, ended by `data: [DONE]`."""
        start = self.clock()
        conn, resp = self._post(self._payload(prompt, max_new_tokens, True))
        first = last = None
        first_tokens = 0
        meta = None
        try:
            for raw in resp:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                now = self.clock()
                meta = json.loads(data)["meta_info"]
                if first is None:
                    first, first_tokens = now, meta["completion_tokens"]
                last = now
        finally:
            conn.close()
        if meta is None:
            raise RuntimeError("stream ended without a data event")
        decoded = meta["completion_tokens"] - first_tokens
        return _checked(meta, max_new_tokens, {
            "wall_s": last - start,
            "ttft_ms": 1e3 * (first - start),
            # Time between the first and the last event over the tokens they brought.
            "ms_per_token": 1e3 * (last - first) / decoded if decoded else None,
        })


def _checked(meta: dict, max_new_tokens: int, timing: dict) -> dict:
    if meta["completion_tokens"] != max_new_tokens:
        raise RuntimeError(f"server decoded {meta['completion_tokens']} tokens, asked for "
                           f"{max_new_tokens} (finish_reason {meta.get('finish_reason')}); "
                           "is ignore_eos honoured?")
    timing.update({"prompt_tokens": meta["prompt_tokens"], "completion_tokens": meta["completion_tokens"],
                   "e2e_latency_s": meta.get("e2e_latency")})
    return timing


def run_trial(client: Client, batch: int, prompt: str, max_new_tokens: int, stream: bool) -> dict:
    """B concurrent requests; returns the trial's per-token latency, TTFT and throughput."""
    call = client.generate_stream if stream else client.generate
    start = client.clock()
    with ThreadPoolExecutor(max_workers=batch) as pool:
        results = list(pool.map(lambda _: call(prompt, max_new_tokens), range(batch)))
    wall = client.clock() - start
    trial = {
        "ms_per_token": statistics.fmean(r["ms_per_token"] for r in results if r["ms_per_token"] is not None),
        "tok_per_s": sum(r["completion_tokens"] for r in results) / wall,
        "wall_s": wall,
        "prompt_tokens": results[0]["prompt_tokens"],
    }
    if stream:
        trial["ttft_ms"] = statistics.fmean(r["ttft_ms"] for r in results)
    return trial


def sweep(client: Client, batches: list, trials: int, warmup: int, prompt: str,
          max_new_tokens: int, stream: bool = True) -> list:
    out = []
    for batch in batches:
        for warm in range(warmup):
            run_trial(client, batch, prompt, max_new_tokens, stream)
        runs = [run_trial(client, batch, prompt, max_new_tokens, stream) for trial in range(trials)]
        row = {"batch": batch, "trials": runs}
        for key in ("ms_per_token", "tok_per_s", "ttft_ms"):
            if key in runs[0]:
                row[key] = summary([r[key] for r in runs])
        out.append(row)
    return out


def read_api_key(source: str) -> str:
    """sglang's --api-key from standard input ("-") or a file private to its owner; "" = no key.

    Only the first line counts, without its line break.
    """
    if source == "-":
        return sys.stdin.readline().rstrip("\r\n")
    with open(source) as f:
        mode = os.fstat(f.fileno()).st_mode
        if stat.S_ISREG(mode) and mode & 0o077:
            raise SystemExit(f"{source}: readable by others (mode {stat.S_IMODE(mode):04o}); chmod 600 it")
        return f.readline().rstrip("\r\n")


def main(argv=None) -> int:
    # allow_abbrev=False: "--api-key SECRET" must not pass as an abbreviation of --api-key-file.
    p = argparse.ArgumentParser(prog="python -m infertune.bench_client", description=__doc__.partition("\n")[0],
                                allow_abbrev=False)
    p.add_argument("--url", required=True, help="sglang server, e.g. http://127.0.0.1:30000")
    p.add_argument("--backend", required=True, help="name of this configuration, e.g. the MoE runner backend")
    p.add_argument("--out", required=True, help="JSON file to write; - prints the JSON alone")
    p.add_argument("--batch", default="1,8,64", help="comma-separated batch sizes")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1, help="untimed trials before each batch size")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("--no-stream", dest="stream", action="store_false",
                   help="plain requests: ms/token from meta_info e2e_latency (includes prefill)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--api-key-file", metavar="FILE",
                   help="sglang's API key (first line), sent as a bearer token; - reads standard input; "
                        "the file must be private to its owner (mode 600)")
    a = p.parse_args(argv)
    batches = [int(b) for b in a.batch.split(",")]
    if a.trials < 1 or a.max_new_tokens < 2 or min(batches) < 1:
        p.error("need --trials >= 1, --max-new-tokens >= 2 and batch sizes >= 1")
    client = Client(a.url, a.timeout, api_key=read_api_key(a.api_key_file) if a.api_key_file else "")
    report = {
        "backend": a.backend, "url": a.url, "started": datetime.now(timezone.utc).isoformat(),
        "max_new_tokens": a.max_new_tokens, "trials": a.trials, "warmup": a.warmup, "stream": a.stream,
        "results": sweep(client, batches, a.trials, a.warmup, a.prompt, a.max_new_tokens, a.stream),
    }
    if a.out == "-":
        # Only the JSON: over a remote connection stderr may arrive on the same stream.
        json.dump(report, sys.stdout, indent=2)
        return 0
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
    for row in report["results"]:
        print(f"{a.backend} batch {row['batch']}: {row['ms_per_token']['median']:.2f} ms/token "
              f"(p90 {row['ms_per_token']['p90']:.2f}), {row['tok_per_s']['median']:.0f} tok/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
