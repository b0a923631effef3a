"""A minimal OpenAI-compatible /v1/completions server for the engine's retry and cache tests only
(a real `transformers serve` cannot be told to answer 429 or fail on cue).

python tests/openai_stub.py PORTFILE LOGFILE [STATUS,STATUS,...]: answers the scripted statuses in
order (0: hold the request for 3 s, then answer 200; 201: answer 200 without log-probs, as
`transformers serve` does), then 200 forever; appends each request body as one JSON line to LOGFILE; writes its port to
PORTFILE once listening. A 200 echoes the request's seed, with usage and per-token log-probs.
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock

port_file, log_file = sys.argv[1], sys.argv[2]
script = [int(s) for s in sys.argv[3].split(",")] if len(sys.argv) > 3 and sys.argv[3] else []
lock = Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with lock:
            with open(log_file, "a") as f:
                f.write(json.dumps({**body, "auth": self.headers.get("Authorization")}) + "\n")
            status = script.pop(0) if script else 200
        if status == 0:  # a stalled server: the client's timeout must fire first
            time.sleep(3)
            status = 200
        plain = status == 201
        if plain:
            status = 200
        if status != 200:
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b'{"error": "scripted"}')
            return
        text = f"sample with seed {body['seed']}"
        choice = {"index": 0, "text": text, "finish_reason": "length"}
        if not plain:
            choice["logprobs"] = {"token_logprobs": [-0.5, -0.25, -0.125]}
        out = {"choices": [choice],
               "usage": {"prompt_tokens": len(body["prompt"].split()), "completion_tokens": 3}}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402  (rename last: the test reads the port only when it is complete)

os.replace(port_file + ".tmp", port_file)
server.serve_forever()
