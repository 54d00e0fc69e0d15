"""`LLMEngine`: add_request / step / abort over the scheduler, block manager and model runner.

Single-threaded by design: one caller drives `step()` (the async engine's loop thread); nothing
here blocks on I/O.

Async scheduling (`async_scheduling`): `step()` schedules and launches step t+1 before it reads
step t's samples back, so the host builds a step while the device runs the previous one. A
sequence whose newest token is still on the device carries a placeholder id at the end of
`token_ids` (the runner feeds the device value instead); outputs come one call later. A sequence
found finished when its token is read back may already be in the launched step: that extra
sample is dropped and its KV slot is freed with the sequence's blocks.

What a step hands out is the output sink's (`output=`, fixed at construction): `RequestOutput`s
(text) by default, `RequestDelta`s (token ids) in the engine-core process. The start-up warm-up
is its builder's to run (`build_engine`, build.py), not the constructor's.
"""

from __future__ import annotations

import itertools
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, overload

from serving.engine.config import EngineConfig
from serving.engine.core.kv_coordinator import make_block_manager
from serving.engine.core.output_processor import Out, OutputFactory, OutputProcessor, OutputSink
from serving.engine.core.request import Request, Sequence
from serving.engine.core.request_checks import check_new_request
from serving.engine.core.sample_result import SampleResult
from serving.engine.core.sample_targets import Fork, apply_forks, sample_targets
from serving.engine.core.scheduler import Scheduler, SchedulerConfig, SchedulerOutput
from serving.engine.engine.runner_setup import set_up_runner
from serving.engine.worker.runner import ModelRunner
from serving.engine.worker.step_runner import LaunchedStep, StepRunner
from serving.outputs import EngineStats, RequestMetrics, RequestOutput
from serving.sampling_params import SamplingParams

if TYPE_CHECKING:
    from serving.distributed.startup import TensorParallel
    from serving.engine.engine.runner_setup import ModelInput


class LLMEngine(Generic[Out]):
    @overload
    def __init__(
        self: LLMEngine[RequestOutput],
        engine_config: EngineConfig,
        loaded: ModelInput | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        engine_config: EngineConfig,
        loaded: ModelInput | None = None,
        *,
        output: OutputFactory[Out],
    ) -> None: ...

    def __init__(
        self,
        engine_config: EngineConfig,
        loaded: ModelInput | None = None,
        *,
        output: OutputFactory[Any] = OutputProcessor,
    ) -> None:
        """`loaded`: a LoadedModel (config, HF-named state_dict, tokenizer) to use instead of
        loading `engine_config.model_path` (tests pass tiny random models this way). `output`:
        builds the output sink from (tokenizer, eos token ids, max_model_len)."""
        cfg = engine_config
        self.config = cfg
        self.device = cfg.resolve_device()
        setup = set_up_runner(cfg, loaded, self.device)
        self.runner: StepRunner = setup.runner
        self.local_runner: ModelRunner | None = setup.local_runner  # None with tensor parallel
        self.tensor_parallel: TensorParallel | None = setup.tensor_parallel
        self.model_config = setup.loaded.config
        self.tokenizer = setup.loaded.tokenizer
        self.max_model_len = setup.max_model_len
        self._new_block_manager = partial(
            make_block_manager,
            setup.kv_groups,
            setup.group_blocks,
            cfg.block_size,
            cfg.enable_prefix_caching,
        )
        self.block_manager = self._new_block_manager()
        self.scheduler = self._new_scheduler()
        eos = list(
            getattr(self.tokenizer, "eos_token_ids", None) or self.model_config.eos_token_ids or []
        )
        self.eos_token_ids = eos
        self.output: OutputSink[Out] = output(self.tokenizer, eos, self.max_model_len)
        self.requests: dict[str, Request] = {}
        self._seq_ids = itertools.count()
        self._prompt_tokens_total = 0
        self._generation_tokens_total = 0
        self.async_scheduling = cfg.resolve_async_scheduling(self.device)
        self._inflight: LaunchedStep | None = None  # launched, samples not read back yet
        self._pending: dict[Sequence, int] = {}  # placeholder holder -> index in its samples
        # live requests with penalties: the sampler needs their real tokens, so the engine reads
        # each step back before scheduling the next while one is live
        self._host_token_requests: set[str] = set()

    def _new_scheduler(self) -> Scheduler:
        cfg = self.config
        return Scheduler(
            SchedulerConfig(
                cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.enable_chunked_prefill
            ),
            self.block_manager,
        )

    # ---- requests --------------------------------------------------------------------------
    def validate_request(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> None:
        """Raise ValueError naming the problem; pure, so other threads may call it."""
        check_new_request(
            request_id,
            prompt_token_ids,
            params,
            in_use=self.requests,
            vocab_size=self.model_config.vocab_size,
            max_model_len=self.max_model_len,
        )

    def add_request(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prompt: str | None = None,
        arrival_time: float | None = None,
    ) -> None:
        self.validate_request(request_id, prompt_token_ids, params)
        metrics = RequestMetrics(
            arrival_time=arrival_time if arrival_time is not None else time.monotonic()
        )
        req = Request(
            request_id, prompt, list(prompt_token_ids), params, metrics, forked=params.n == 1
        )
        req.seqs.append(self._new_seq(req, 0))
        self.requests[request_id] = req
        if params.prompt_logprobs is not None:
            self.runner.prompt_logprob_requests.add(request_id)
        if params.frequency_penalty or params.presence_penalty:
            self._host_token_requests.add(request_id)
        self._prompt_tokens_total += len(prompt_token_ids)
        self.scheduler.add(req.seqs[0])

    def _new_seq(self, req: Request, index: int) -> Sequence:
        seq = Sequence(
            seq_id=next(self._seq_ids),
            request=req,
            index=index,
            token_ids=list(req.prompt_token_ids),
            num_prompt_tokens=len(req.prompt_token_ids),
            generator=req.make_generator(index, self.device),
        )
        self.output.init_seq(seq)
        return seq

    def abort(self, request_id: str) -> Out | None:
        """Stop a request now and free its KV blocks; returns its final output (None if unknown)."""
        req = self.requests.pop(request_id, None)
        if req is None:
            return None
        self.runner.prompt_logprob_requests.discard(request_id)
        self._host_token_requests.discard(request_id)
        for seq in req.seqs:
            if self._pending.pop(seq, None) is not None:
                seq.token_ids.pop()  # its sample is still on the device: never emitted
            if not seq.is_finished:
                seq.finish_reason = "abort"
                self.scheduler.finish(seq)
        req.forked = True  # an unforked n > 1 request ends with the one sequence it has
        return self.output.request_output(req)

    def set_async_scheduling(self, on: bool) -> list[Out]:
        """Switch modes between steps (benchmarks compare both on one engine); returns the
        outputs of a step still in flight."""
        outputs = self._read_back(self._inflight) if self._inflight is not None else []
        self.async_scheduling = on
        return outputs

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    # ---- the step --------------------------------------------------------------------------
    def step(self) -> list[Out]:
        if self.async_scheduling:
            return self._step_async()
        out = self.scheduler.schedule()
        if out.is_empty:
            return []
        targets, forks = self._sample_targets(out)
        results = self.runner.execute(out, targets)
        self.scheduler.update_after_step(out)
        self._fork(forks)
        return self._emit(results)

    def _step_async(self) -> list[Out]:
        previous = self._inflight
        outputs: list[Out] = []
        if previous is not None and self._host_token_requests:
            outputs = self._read_back(previous)
            previous = None
        out = self.scheduler.schedule()
        if out.is_empty:
            if previous is not None:
                outputs += self._read_back(previous)
            return outputs
        targets, forks = self._sample_targets(out)
        launched = self.runner.launch(out, targets, previous, self._pending)
        if previous is not None:  # step t+1 is queued: now wait for step t's samples
            outputs += self._read_back(previous)
        # a sequence that just finished ran one token too many: its blocks are freed already
        done = [item for item in out.scheduled if not item.seq.is_finished]
        self.scheduler.update_after_step(
            SchedulerOutput(scheduled=done) if len(done) < len(out.scheduled) else out
        )
        self._fork(forks)
        self._inflight = launched
        for i, seq in enumerate(launched.seqs):
            if not seq.is_finished:
                seq.token_ids.append(0)  # placeholder: the runner reads the device's value
                self._pending[seq] = i
        return outputs

    def _read_back(self, step: LaunchedStep) -> list[Out]:
        """Wait for `step`'s samples; swap each placeholder for its token and emit outputs."""
        if self._inflight is step:
            self._inflight = None
        pending = self._pending
        results = []
        for r in step.results():
            if pending.pop(r.seq, None) is not None:
                r.seq.token_ids.pop()
                results.append(r)
        pending.clear()  # placeholders belong to the newest launched step only
        return self._emit(results)

    def _sample_targets(self, out: SchedulerOutput) -> tuple[list[list[Sequence]], list[Fork]]:
        return sample_targets(out, self._new_seq, time.monotonic())

    def _fork(self, forks: list[Fork]) -> None:
        apply_forks(self.scheduler, forks)

    def _emit(self, results: list[SampleResult]) -> list[Out]:
        progressed: dict[str, Request] = {}
        now = time.monotonic()
        append = self.output.append
        self._generation_tokens_total += len(results)
        for r in results:
            req = r.seq.request
            metrics = req.metrics
            if metrics.first_token_time is None:
                metrics.first_token_time = now
            metrics.last_token_time = now
            if append(r):
                self.scheduler.finish(r.seq)
            progressed[req.request_id] = req
        outputs: list[Out] = []
        for req in progressed.values():
            out = self.output.request_output(req)
            if out is not None:  # None: batched (TokenRows) or a FINAL_ONLY request still running
                outputs.append(out)
            if req.is_finished:
                del self.requests[req.request_id]
                self.runner.prompt_logprob_requests.discard(req.request_id)
                self._host_token_requests.discard(req.request_id)
        return outputs

    def reset(self) -> None:
        """Forget everything that ran: read back a step still in flight, then a new block
        manager and scheduler over the same KV pool, counters at zero. Call with no request
        live (the start-up warm-up does, once its burst has finished)."""
        if self.requests:
            raise RuntimeError(f"reset with {len(self.requests)} requests live")
        if self._inflight is not None:  # the last lookahead step, for sequences already finished
            self._read_back(self._inflight)
        self.block_manager = self._new_block_manager()
        self.scheduler = self._new_scheduler()
        self._prompt_tokens_total = 0
        self._generation_tokens_total = 0

    def close(self) -> None:
        """Stop the tensor-parallel shard processes, if any (idempotent)."""
        if self.tensor_parallel is not None:
            self.tensor_parallel.close()

    def stats(self) -> EngineStats:
        return EngineStats(
            num_running=len(self.scheduler.running),
            num_waiting=len(self.scheduler.waiting),
            kv_cache_usage=self.block_manager.usage,
            num_preemptions_total=self.scheduler.num_preemptions_total,
            prefix_cache_queries_total=self.block_manager.prefix_queries,
            prefix_cache_hits_total=self.block_manager.prefix_hits,
            prompt_tokens_total=self._prompt_tokens_total,
            generation_tokens_total=self._generation_tokens_total,
        )
