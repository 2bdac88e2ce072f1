"""HFLLM's decoding loop: prefill a batch, then decode it token by token over a preallocated KV cache.

Each batch is prefilled one prompt at a time (on a CPU: a padded batch prefill cost ~2x per real token
there) or as one left-padded forward (`prefill_each=False`, for GPUs), then decoded together; a sample
leaves the batch as soon as it ends, and the `n` samples of a prompt share its prefill. Log-probs are
`log_softmax` of the raw logits at the chosen token; sampling is exactly temperature then top-p.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

from hoprag.llm.base import cut_at_stop
from hoprag.llm.types import Generation, SamplingParams


class Decoder:
    """Generates for batches of token-id prompts with one loaded model and tokenizer."""

    def __init__(self, model: Any, tokenizer: Any, prefill_each: bool) -> None:
        self.model, self.tokenizer, self.prefill_each = model, tokenizer, prefill_each
        self.eos = self._eos_ids()

    def _prefill(self, batch: list[list[int]], max_new_tokens: int) -> tuple[Any, Any, Any, Any]:
        """KV cache, last-position logits (B, V), attention mask (B, W) and next positions (B,) of the
        left-padded batch."""
        import torch
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        model = self.model
        device = model.device
        width = max(len(x) for x in batch)
        mask = torch.zeros((len(batch), width), dtype=torch.long, device=device)
        for row, x in enumerate(batch):
            mask[row, width - len(x) :] = 1
        lengths = torch.tensor([len(x) for x in batch], device=device)
        cache = DynamicCache(config=model.config)
        # full-attention layers get preallocated buffers; sliding-window (or other) ones stay the model's
        preallocated = all(type(layer) is DynamicLayer for layer in cache.layers)
        if preallocated:
            cache.layers = [_PreallocatedLayer(width + max_new_tokens) for _ in cache.layers]
        if preallocated and self.prefill_each and len(batch) > 1:
            logits = []
            for row, x in enumerate(batch):
                out = model(input_ids=torch.tensor([x], device=device), use_cache=True, logits_to_keep=1)
                for layer, own in zip(cache.layers, out.past_key_values.layers):
                    layer.put(row, len(batch), own.keys, own.values, width)
                logits.append(out.logits[:, -1, :])
            return cache, torch.cat(logits), mask, lengths
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long, device=device)
        for row, x in enumerate(batch):
            input_ids[row, width - len(x) :] = torch.tensor(x, device=device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.past_key_values, out.logits[:, -1, :], mask, lengths

    def generate_batch(
        self,
        batch: list[list[int]],
        params: SamplingParams,
        generators: list[Any],
        finished: Callable[[int], Any] | None = None,
        opened: list[bool] | None = None,
    ) -> list[list[Generation]]:
        """`generators[i]` samples prompt i's rows (the same object for all: one stream for the batch);
        `finished(k)` is told as each step's k samples end (a progress bar's update); `opened[i]`: prompt i
        left a reasoning block open, in which no stop string is looked for (`hoprag.llm.reasoning`)."""
        import torch

        model = self.model
        tok = self.tokenizer
        eos = self.eos
        n = params.n
        opened = opened or [False] * len(batch)
        cache, logits, mask, positions = self._prefill(batch, params.max_new_tokens)
        if n > 1:
            cache.batch_repeat_interleave(n)
            logits, mask, positions = (t.repeat_interleave(n, dim=0) for t in (logits, mask, positions))
        rows = len(batch) * n
        generated: list[list[int]] = [[] for _ in range(rows)]
        logprobs: list[list[float]] = [[] for _ in range(rows)]
        scored = self.candidate_ids(params.candidates)
        candidates: list[list[dict[str, float]]] = [[] for _ in range(rows)]
        active = list(range(rows))  # sample rows still generating, in cache order
        for step in range(params.max_new_tokens):
            logits = logits.float()
            chosen = choose(logits, params, [generators[row // n] for row in active])
            all_lp = torch.log_softmax(logits, dim=-1)
            chosen_lp = all_lp.gather(1, chosen[:, None]).squeeze(1)
            if scored:
                for row, values in zip(active, all_lp[:, list(scored.values())].tolist()):
                    candidates[row].append(dict(zip(scored, values)))
            keep = []
            for j, (row, t, lp) in enumerate(zip(active, chosen.tolist(), chosen_lp.tolist())):
                generated[row].append(t)
                logprobs[row].append(lp)
                if t in eos:
                    continue
                text = tok.decode(generated[row], skip_special_tokens=True) if params.stop else ""
                if params.stop and cut_at_stop(text, params.stop, opened[row // n])[1]:
                    continue
                keep.append(j)
            if not keep or step == params.max_new_tokens - 1:
                if finished is not None:
                    finished(len(active))
                break
            if finished is not None and len(keep) < len(active):
                finished(len(active) - len(keep))
            if len(keep) < len(active):
                index = torch.tensor(keep, device=mask.device)
                cache.batch_select_indices(index)
                chosen, mask, positions = chosen[index], mask[index], positions[index]
                active = [active[j] for j in keep]
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            out = model(
                input_ids=chosen[:, None],
                attention_mask=mask,
                position_ids=positions[:, None],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            cache, logits, positions = out.past_key_values, out.logits[:, -1, :], positions + 1
        asked = bool(params.candidates)
        return [
            [
                self.finish(generated[r], logprobs[r], params.stop, len(x), candidates[r] if asked else None,
                            params.keep_special_tokens, opened[i])
                for r in range(i * n, (i + 1) * n)
            ]
            for i, x in enumerate(batch)
        ]  # fmt: skip

    def candidate_ids(self, candidates: Sequence[str]) -> dict[str, int]:
        """The vocabulary id of each candidate that is one token (as `convert_tokens_to_ids` spells it,
        added tokens included); the others cannot be scored and are left out."""
        tok = self.tokenizer
        ids = {c: tok.convert_tokens_to_ids(c) for c in candidates}
        return {c: i for c, i in ids.items() if i is not None and i != tok.unk_token_id}

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (self.model.generation_config.eos_token_id, self.tokenizer.eos_token_id):
            if isinstance(source, int):
                ids.add(source)
            elif source:
                ids.update(source)
        return ids

    def finish(
        self,
        ids: list[int],
        logprobs: list[float],
        stop: Sequence[str],
        prompt_tokens: int,
        candidates: list[dict[str, float]] | None = None,
        keep_special_tokens: bool = False,
        opened: bool = False,
    ) -> Generation:
        """One sample's Generation from the ids it generated (EOS or the stop-completing token last), its
        reasoning block still in the text (`LLM.generate` splits it off)."""
        tok = self.tokenizer
        eos = self.eos
        end = next((i for i, t in enumerate(ids) if t in eos), None)
        content = ids if end is None else ids[:end]

        def decode(k: int) -> str:
            return tok.decode(content[:k], skip_special_tokens=not keep_special_tokens)

        text = decode(len(content))
        kept, stopped = cut_at_stop(text, stop, opened)
        if stopped:
            # the first prefix that holds a stop string is where generation ended; the first prefix that
            # covers the kept text is what tokens/logprobs report
            generated = first_prefix(len(content), lambda k: cut_at_stop(decode(k), stop, opened)[1])
            keep = first_prefix(len(content), lambda k: len(decode(k)) >= len(kept)) if kept else 0
            finish = "stop"
        elif end is not None:  # the EOS token is not counted (the token rule of `Generation`)
            generated, keep, finish = end, len(content), "stop"
        else:
            generated, keep, finish = len(content), len(content), "length"
        kept_ids = content[:keep]
        return Generation(
            text=kept,
            tokens=tuple(tok.batch_decode([[t] for t in kept_ids])),
            logprobs=tuple(logprobs[:keep]),
            prompt_tokens=prompt_tokens,
            completion_tokens=generated,
            finish_reason=finish,
            candidate_logprobs=None if candidates is None else tuple(candidates[:keep]),
        )

def choose(logits: Any, params: SamplingParams, generators: list[Any]) -> Any:
    """The next token of each row: argmax when greedy, else a temperature / top-p sample drawn from
    the row's generator (one draw for the batch when every row shares one)."""
    import torch

    if params.greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / params.temperature, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, sorted_ids = probs.sort(dim=-1, descending=True)
        # drop a token when the tokens ranked above it already hold top_p of the mass (the first stays)
        drop = sorted_probs.cumsum(dim=-1) - sorted_probs > params.top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, sorted_ids, sorted_probs)
    if all(g is generators[0] for g in generators):
        return torch.multinomial(probs, 1, generator=generators[0]).squeeze(1)
    return torch.cat([torch.multinomial(p[None], 1, generator=g)[0] for p, g in zip(probs, generators)])


def _preallocated_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        """A full-attention KV-cache layer that writes each step into a buffer preallocated for the whole
        generation. transformers' `DynamicLayer` concatenates instead, copying the whole cache at every
        step, which on a CPU took about as long as the model itself in batched decoding."""

        def __init__(self, capacity: int) -> None:
            super().__init__()
            self.capacity = capacity
            self._k = self._v = None
            self._len = 0

        def _view(self) -> None:
            self.keys, self.values = self._k[:, :, : self._len], self._v[:, :, : self._len]

        def _allocate(self, like: Any, batch: int, capacity: int) -> None:
            shape = (batch, like.shape[1], capacity, like.shape[3])
            k, v = like.new_zeros(shape), like.new_zeros(shape)
            if self._k is not None and self._len:
                k[:, :, : self._len], v[:, :, : self._len] = self._k[:, :, : self._len], self._v[:, :, : self._len]
            self._k, self._v = k, v

        def put(self, row: int, batch: int, keys: Any, values: Any, width: int) -> None:
            """Row `row` of a left-padded batch: one prompt's own (1, heads, len, dim) cache, ending at `width`."""
            if not self.is_initialized:
                self.lazy_initialization(keys, values)
                self._allocate(keys, batch, max(self.capacity, width))
            n = keys.shape[2]
            self._k[row, :, width - n : width], self._v[row, :, width - n : width] = keys[0], values[0]
            self._len = width
            self._view()

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            need = self._len + key_states.shape[2]
            if self._k is None or need > self._k.shape[2]:
                old = 0 if self._k is None else self._k.shape[2]
                self._allocate(key_states, key_states.shape[0], max(need, self.capacity, 2 * old))
            self._k[:, :, self._len : need], self._v[:, :, self._len : need] = key_states, value_states
            self._len = need
            self._view()
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self._len if self.is_initialized else 0

        def batch_select_indices(self, indices: Any) -> None:
            if self._k is not None:
                self._k, self._v = self._k[indices], self._v[indices]
                self._view()

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self._k is not None:
                self._k, self._v = self._k.repeat_interleave(repeats, 0), self._v.repeat_interleave(repeats, 0)
                self._view()

        def reset(self) -> None:
            self._k = self._v = None
            self._len = 0
            super().reset()

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove < 0 and self._k is not None:
                self._len = max(0, self._len + tokens_to_remove)
                self._view()

    return PreallocatedLayer


def _PreallocatedLayer(capacity: int) -> Any:  # noqa: N802 - builds the class lazily (transformers import)
    global _PREALLOCATED
    if _PREALLOCATED is None:
        _PREALLOCATED = _preallocated_layer_class()
    return _PREALLOCATED(capacity)


_PREALLOCATED: type | None = None


def first_prefix(n: int, holds: Any) -> int:
    """The smallest k in 1..n for which `holds(k)` (monotone in k), or n when none does."""
    k = bisect.bisect_left(range(1, n + 1), True, key=holds) + 1
    return min(k, n)
