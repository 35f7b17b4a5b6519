"""Model clients: one protocol (protocol.py), one module per backend (local transformers, llama.cpp, TGI,
OpenAI-compatible, the weightless echo) behind one registry (registry.py: get_client), the shared HTTP machinery
(http.py: retries, concurrency), where a local model's weights are (checkpoints.py, gguf_models.py, demo_models.py,
ladder.py), and a local model in a process of its own (model_process.py, on helper processes: background.py)."""
