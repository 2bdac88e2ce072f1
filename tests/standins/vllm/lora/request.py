"""vLLM's `LoRARequest`: an adapter's name, integer id and folder, carried by each request that uses it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str
