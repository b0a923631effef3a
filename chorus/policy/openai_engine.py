"""engine=openai: the engine interface on any OpenAI-compatible endpoint (`transformers serve`,
vLLM, SGLang, hosted APIs) through its /v1/completions route.

The protocols hand engines prompts already rendered with the model's chat template, so the legacy
completions route (raw text in) keeps prompts identical to the hf and vllm engines'. One request per
(prompt, sample): each sample gets its own seed and cache entry, and `usage` counts one sample exactly.
Standard library only (urllib, sqlite3): the default install needs nothing more. The API key is read
from the environment variable the config names, at each request, and never stored or cached.

What servers return differs: `transformers serve` (5.x) answers /v1/completions without log-probs
(it ignores the `logprobs` field), refuses `top_k` (HTTP 422) and samples only when the model's
generation_config says so (policy.api_extra_body can ask for it). vLLM and SGLang document log-probs
on this route (not tested here: neither runs on this CPU-only project's test machines).
A Generation's `logprobs` is empty when the server sent none; rows then record None, not zeros.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from .engines import Generation, SamplingParams
from .fence_stop import fence_closed

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
USAGE_KEYS = ("paid_samples", "paid_prompt_tokens", "paid_completion_tokens",
              "cached_samples", "cached_prompt_tokens", "cached_completion_tokens")


class EndpointError(OSError):
    """The endpoint refused or kept failing; chorus.evaluate prints it as a one-line error."""


@dataclass(frozen=True)
class EndpointConf:
    base_url: str  # e.g. http://127.0.0.1:8000/v1
    model: str
    api_key_env: str | None = None
    concurrency: int = 4
    max_retries: int = 5
    backoff_s: float = 1.0  # the first wait; doubles each retry
    timeout_s: float = 120.0
    extra_body: dict | None = None  # merged into every request (server-specific sampling switches)


class CompletionCache:
    """Finished samples in a sqlite file, written as each one arrives, so a crashed run pays only for
    the rest. The key hashes everything that decides a completion; the key itself never holds a secret."""

    def __init__(self, path: str | Path | None):
        self.path, self._lock = path, threading.Lock()
        self._db = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, value TEXT)")
            self._db.commit()

    @staticmethod
    def key(base_url: str, model: str, prompt: str, params: SamplingParams, sample: int,
            extra_body: dict | None = None) -> str:
        # extra_body joins the key only when set, so caches written without it stay valid
        parts = [base_url.rstrip("/"), model, prompt, asdict(params), sample] + ([extra_body] if extra_body else [])
        blob = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> dict | None:
        if self._db is None:
            return None
        with self._lock:
            row = self._db.execute("SELECT value FROM completions WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict) -> None:
        if self._db is not None:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO completions VALUES (?, ?)", (key, json.dumps(value)))
                self._db.commit()


def cache_path(cache_root: Path) -> Path:
    """Where policy.api_cache keeps completions: under chorus's one cache root (sim/cache.py)."""
    return Path(cache_root) / "openai" / "completions.sqlite"


def request_body(model: str, prompt: str, params: SamplingParams, seed: int, extra: dict | None = None) -> dict:
    body = {"model": model, "prompt": prompt, "max_tokens": params.max_new_tokens,
            "temperature": params.temperature, "top_p": params.top_p, "seed": seed, "logprobs": 1}
    if params.top_k > 0:  # not in OpenAI's API: vLLM and SGLang take it, `transformers serve` answers 422
        body["top_k"] = params.top_k
    return {**body, **(extra or {})}


def to_generation(response: dict) -> dict:
    """A completions response as Generation fields (plain data, the form the cache stores)."""
    choice = response["choices"][0]
    text = choice.get("text") or ""
    usage = response.get("usage") or {}
    logprobs = [float(x) for x in ((choice.get("logprobs") or {}).get("token_logprobs") or []) if x is not None]
    if choice.get("finish_reason") == "length":
        reason = "length"
    else:  # the server stopped at its EOS or a stop string; the fence check matches the hf engine's label
        reason = "stop" if fence_closed(text) else "eos"
    return {"text": text, "token_ids": [], "logprobs": logprobs, "finish_reason": reason,
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "meta": {"completion_tokens": int(usage.get("completion_tokens", len(logprobs))),
                     "server_finish_reason": choice.get("finish_reason")}}


class OpenAIEngine:
    def __init__(self, conf: EndpointConf, cache: CompletionCache | None = None, sleep=time.sleep):
        if conf.concurrency < 1:
            raise ValueError(f"policy.api_concurrency must be >= 1, got {conf.concurrency}")
        if conf.api_key_env and not os.environ.get(conf.api_key_env):
            raise ValueError(f"environment variable {conf.api_key_env} (policy.api_key_env) is empty; "
                             f"export the API key there or set policy.api_key_env=null")
        self.conf, self.cache, self._sleep = conf, cache or CompletionCache(None), sleep
        self.http_calls = 0  # requests sent, retries included (tests and overhead measurements read it)
        # Per sample returned by this engine: paid (answered by the server in this run) or cached
        # (read from the completion cache), with the server-reported tokens of each kind.
        self.usage = {k: 0 for k in USAGE_KEYS}
        self._count = threading.Lock()

    def _post(self, body: dict) -> dict:
        url = self.conf.base_url.rstrip("/") + "/completions"
        headers = {"Content-Type": "application/json"}
        if self.conf.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ.get(self.conf.api_key_env, '')}"
        last = ""
        for attempt in range(self.conf.max_retries + 1):
            with self._count:
                self.http_calls += 1
            req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.conf.timeout_s) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRY_STATUS:
                    detail = exc.read().decode(errors="replace")[:200].replace("\n", " ")
                    raise EndpointError(f"{url} answered HTTP {exc.code}: {detail}; check policy.api_base_url, "
                                        f"policy.api_model, the key, and fields the server may not take "
                                        f"(policy.top_k, policy.api_extra_body)") from None
                last, wait = f"HTTP {exc.code}", _retry_after(exc)
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                # HTTPException: a server killed mid-answer (IncompleteRead, BadStatusLine)
                last, wait = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}", None
            if attempt < self.conf.max_retries:
                self._sleep(wait if wait is not None else self.conf.backoff_s * 2 ** attempt)
        raise EndpointError(f"{url} failed {self.conf.max_retries + 1} times (last: {last}); finished samples "
                            f"are cached, rerun the same command to resume")

    def probe(self, timeout_s: float = 10.0) -> None:
        """One GET of the endpoint's /models, uncached and unretried: an EndpointError when it cannot be
        reached or refuses the key. A server without that route (HTTP 404) counts as reachable."""
        url = self.conf.base_url.rstrip("/") + "/models"
        headers = {"Authorization": f"Bearer {os.environ.get(self.conf.api_key_env, '')}"} if self.conf.api_key_env else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                        timeout=min(timeout_s, self.conf.timeout_s)):
                return
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise EndpointError(f"{url} answered HTTP {exc.code}; check the address and the key") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            raise EndpointError(f"{url} cannot be reached ({getattr(exc, 'reason', exc)}); start the server or "
                                "fix the base URL") from None

    def _one(self, prompt: str, params: SamplingParams, sample: int, failed: threading.Event) -> Generation | None:
        key = CompletionCache.key(self.conf.base_url, self.conf.model, prompt, params, sample, self.conf.extra_body)
        fields = self.cache.get(key)
        cached = fields is not None
        if not cached:
            if failed.is_set():  # another sample failed for good: do not keep hitting a dead endpoint
                return None
            try:
                fields = to_generation(self._post(request_body(self.conf.model, prompt, params, params.seed + sample,
                                                               self.conf.extra_body)))
            except Exception:
                failed.set()
                raise
            self.cache.put(key, fields)
        kind = "cached" if cached else "paid"
        with self._count:
            self.usage[f"{kind}_samples"] += 1
            self.usage[f"{kind}_prompt_tokens"] += fields["prompt_tokens"]
            self.usage[f"{kind}_completion_tokens"] += fields["meta"]["completion_tokens"]
        return Generation(**{**fields, "meta": {**fields["meta"], "api_cached": cached}})

    def generate(self, prompts: list[str], n: int = 1, params: SamplingParams = SamplingParams()) -> list[list[Generation]]:
        """`n` samples for each prompt; result[i][j] is sample j of prompt i. Requests run
        `concurrency` at a time. Once one fails for good, samples not yet sent are skipped, those in
        flight finish (and are cached), and the failure is raised."""
        # A prompt's k-th repeat in this call takes sample indices k*n .. k*n+n-1: the agentic protocol
        # asks for its samples of one task as repeated prompts with n=1, and each must get its own
        # seed and cache entry (the hf engine's batch rows sample independently too).
        seen: dict[str, int] = {}
        jobs = []
        for p in prompts:
            k = seen[p] = seen.get(p, -1) + 1
            jobs += [(p, k * n + j) for j in range(n)]
        failed = threading.Event()
        with ThreadPoolExecutor(max_workers=self.conf.concurrency) as pool:
            futures = [pool.submit(self._one, p, params, j, failed) for p, j in jobs]
            for f in futures:
                f.exception()  # wait for all, so the first failure in submission order is raised below
            flat = [f.result() for f in futures]
        return [flat[i * n:(i + 1) * n] for i in range(len(prompts))]


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    """The server's Retry-After in seconds (capped at a minute), or None to back off exponentially."""
    try:
        return min(60.0, float(exc.headers.get("Retry-After")))
    except (TypeError, ValueError):
        return None


def open_openai_engine(policy: dict, model_path: str | None, cache_root: Path) -> OpenAIEngine:
    """The engine from policy.api_* settings; the served model's name defaults to `model_path`, the
    completion cache lives under `cache_root` unless policy.api_cache is false."""
    if not policy.get("api_base_url"):
        raise ValueError("policy.engine=openai needs policy.api_base_url=<server>/v1 "
                         "(e.g. http://127.0.0.1:8000/v1 for `transformers serve`)")
    name = policy.get("api_model") or model_path
    if not name:
        raise ValueError("policy.engine=openai needs policy.api_model=<the served model's name>")
    conf = EndpointConf(policy["api_base_url"], name, policy.get("api_key_env"), policy["api_concurrency"],
                        policy["api_max_retries"], policy["api_backoff_s"], policy["api_timeout_s"],
                        dict(policy.get("api_extra_body") or {}) or None)
    return OpenAIEngine(conf, CompletionCache(cache_path(cache_root) if policy["api_cache"] else None))
