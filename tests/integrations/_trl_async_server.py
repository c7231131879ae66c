"""Stand-ins for what TRL's ``AsyncGRPOTrainer`` talks to on a GPU machine, so its real loop runs on CPU.

- :class:`StandInServer`: an HTTP server speaking the routes TRL's rollout worker and ``VLLMClient`` call on a
  ``vllm serve`` instance: ``GET /health``, ``GET /v1/models`` (``max_model_len``), ``POST /v1/completions``
  (token-id prompts, ``n=1``, ``return_token_ids``, ``logprobs=0``, a per-request ``seed``), ``POST /pause`` and
  ``POST /resume``; plus ``POST /stand_in/weights``, where :class:`StandInWeightTransfer` puts the trainer's
  weights. Completions are sampled from a tiny local model (the one the trainer trains, loaded from its folder)
  at the requested temperature, with the sampled tokens' log-probabilities, as vLLM returns them. Every prompt it
  is asked to complete is recorded (:attr:`StandInServer.asked`, and a JSONL file when ``record`` is given).
- :class:`StandInWeightTransfer`: TRL's ``WeightTransferProtocol`` (its injection point ``weight_transfer=``) over
  HTTP: pause the server, send every ``(name, tensor)`` TRL streams, resume. vLLM's NCCL transfer needs GPUs.
- :func:`cpu_seams`: the two GPU-only calls of TRL's trainer replaced for CPU: the tree-attention kernel (FA3, a
  GPU kernel fetched from the hub) by the same attention written in torch, and the peak-FLOPs lookup (a CUDA
  query, for the MFU metric) by ``None``; and TRL's "is vLLM installed" check of the rollout worker answered yes
  (the worker only speaks HTTP to the server; vLLM would run in the server).
"""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

MAX_MODEL_LEN = 64


class StandInServer:
    """Serves completions of the model saved in ``model_dir`` on ``127.0.0.1:<free port>`` (a daemon thread)."""

    def __init__(self, model_dir: str, record: Path | None = None) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager").eval()
        self.name = model_dir
        self.record = record
        self.asked: list[list[int]] = []
        self.weight_syncs = 0
        self._lock = threading.Lock()  # one generation or weight swap at a time
        self._running = threading.Event()
        self._running.set()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="stand-in-vllm")
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- routes --------------------------------------------------------------------------------------------------
    def complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        prompt = [int(t) for t in payload["prompt"]]
        self._running.wait()  # paused during a weight swap
        with self._lock:
            self.asked.append(prompt)
            if self.record is not None:
                with self.record.open("a") as f:
                    f.write(json.dumps(prompt) + "\n")
            ids, logps = self._sample(prompt, int(payload["max_tokens"]), float(payload["temperature"]), payload)
        return {"choices": [{"index": 0, "token_ids": ids, "logprobs": {"token_logprobs": logps}, "text": ""}]}

    @torch.no_grad()
    def _sample(self, prompt: list[int], max_tokens: int, temperature: float, payload: dict[str, Any]) -> Any:
        gen = torch.Generator().manual_seed(int(payload.get("seed", 0)) % (1 << 63))
        eos = int(self.model.config.eos_token_id)
        ids, logps = list(prompt), []
        for _ in range(min(max_tokens, MAX_MODEL_LEN - len(prompt))):
            logits = self.model(torch.tensor([ids])).logits[0, -1].float() / max(temperature, 1e-6)
            log_probs = torch.log_softmax(logits, dim=-1)
            token = int(torch.multinomial(log_probs.exp(), 1, generator=gen))
            ids.append(token)
            logps.append(float(log_probs[token]))
            if token == eos:
                break
        return ids[len(prompt) :], logps

    def load_weights(self, blob: bytes) -> None:
        weights = torch.load(io.BytesIO(blob), weights_only=True)
        with self._lock:
            missing = set(weights) - set(dict(self.model.named_parameters()))
            if missing:
                raise KeyError(f"the server's model has no parameters {sorted(missing)[:3]}")
            self.model.load_state_dict(weights, strict=False)
            self.weight_syncs += 1


def _handler(server: StandInServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, body: dict[str, Any], status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length", 0)))

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?")[0]
            if path == "/health":
                self._send({})
            elif path == "/v1/models":
                self._send({"data": [{"id": server.name, "max_model_len": MAX_MODEL_LEN}]})
            else:
                self._send({"error": f"no route {path}"}, 404)

        def do_POST(self) -> None:  # noqa: N802
            path, body = self.path.split("?")[0], self._body()
            if path == "/v1/completions":
                self._send(server.complete(json.loads(body)))
            elif path == "/pause":
                server._running.clear()
                self._send({})
            elif path == "/resume":
                server._running.set()
                self._send({})
            elif path == "/stand_in/weights":
                server.load_weights(body)
                self._send({})
            else:
                self._send({"error": f"no route {path}"}, 404)

    return Handler


class StandInWeightTransfer:
    """TRL's ``WeightTransferProtocol`` to a :class:`StandInServer`, over HTTP (TRL's own ``VLLMClient`` pauses and
    resumes; the tensors go to ``/stand_in/weights``)."""

    def __init__(self, url: str) -> None:
        from trl.experimental.async_grpo.vllm_client import VLLMClient

        self.client = VLLMClient(url, server_timeout=30)
        self.url = url
        self.sent = 0

    def init_weight_transfer(self) -> None:
        self.client.wait_for_server_ready(poll_interval_s=0.1)

    def pause(self) -> None:
        self.client.pause()

    def send_weights(self, iterator: Any) -> None:
        import requests

        buffer = io.BytesIO()
        torch.save({name: t.detach().cpu().clone() for name, t in iterator}, buffer)
        requests.post(f"{self.url}/stand_in/weights", data=buffer.getvalue(), timeout=60).raise_for_status()
        self.sent += 1

    def resume(self) -> None:
        self.client.resume()

    def destroy(self) -> None:
        pass


def _varlen_attention(q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: Any, max_k: Any, **kw: Any) -> Any:
    """flash-attn's ``flash_attn_varlen_func`` in torch: segment ``i``'s queries attend its keys, causally aligned
    to the keys' end (flash-attn's rule when there are more keys than queries)."""
    scale = kw.get("softmax_scale") or q.shape[-1] ** -0.5
    out = torch.empty_like(q)
    for i in range(cu_q.shape[0] - 1):
        qs, ks = q[cu_q[i] : cu_q[i + 1]], k[cu_k[i] : cu_k[i + 1]]
        vs = v[cu_k[i] : cu_k[i + 1]]
        if ks.shape[1] != qs.shape[1]:  # grouped-query attention
            ks = ks.repeat_interleave(qs.shape[1] // ks.shape[1], dim=1)
            vs = vs.repeat_interleave(qs.shape[1] // vs.shape[1], dim=1)
        scores = torch.einsum("qhd,khd->hqk", qs.float(), ks.float()) * scale
        n_q, n_k = qs.shape[0], ks.shape[0]
        allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out[cu_q[i] : cu_q[i + 1]] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), vs.float()).to(q.dtype)
    return out


def cpu_seams(monkeypatch: Any) -> None:
    """Apply the CPU stand-ins of the module doc (``monkeypatch``: pytest's, or anything with ``setattr``)."""
    from types import SimpleNamespace

    import trl.experimental.async_grpo.async_grpo_trainer as trainer_module
    import trl.experimental.async_grpo.async_rollout_worker as worker_module
    import trl.experimental.async_grpo.packing as packing

    monkeypatch.setattr(packing, "_flash_attn", lambda: SimpleNamespace(flash_attn_varlen_func=_varlen_attention))
    monkeypatch.setattr(trainer_module, "get_peak_flops_per_device", lambda accelerator, dtype: None)
    monkeypatch.setattr(worker_module, "is_vllm_available", lambda: True)
