#!/usr/bin/env python3
"""Conformance test of rill-engine's vllm.grpc.engine.VllmEngine service (the
Shepherd Model Gateway's engine protocol) with a client generated from the
pinned smg-grpc-proto files (proto/smg, fetched by tools/setup.sh).

Drives every RPC against a real rill-engine; the native frontend (rill.v1)
tokenizes, detokenizes and gives the reference greedy tokens. Each check
prints PASS/FAIL; the exit code is the number of failures.

  python tests/clients/vllm_engine_conformance.py --engine 127.0.0.1:PORT \
      --secret_file RUN_DIR/engine.secret --native 127.0.0.1:PORT
"""
import argparse
import hashlib
import importlib
import io
import json
import os
import sys
import tempfile
import threading
import time
import zipfile

import grpc

from check_report import check, summary


def load_stubs(smg_dir, rill_dir):
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="vllm_stubs_")
    for root, files in ((smg_dir, ["common.proto", "vllm_engine.proto"]),
                        (rill_dir, ["rill/v1/inference.proto", "rill/v1/admin.proto"])):
        rc = protoc.main(["protoc", "-I" + root, "--python_out=" + out,
                          "--grpc_python_out=" + out] + files)
        if rc != 0:
            raise RuntimeError("protoc failed on %s" % files)
    sys.path.insert(0, out)
    names = ["common_pb2", "vllm_engine_pb2", "vllm_engine_pb2_grpc",
             "rill.v1.inference_pb2", "rill.v1.inference_pb2_grpc"]
    return {n.split(".")[-1]: importlib.import_module(n) for n in names}


class Harness:
    def __init__(self, args, m):
        self.m = m
        self.pb = m["vllm_engine_pb2"]
        self.common = m["common_pb2"]
        self.secret = open(args.secret_file).read().strip()
        self.md = (("rill-engine-secret", self.secret),)
        self.channel = grpc.insecure_channel(args.engine)
        grpc.channel_ready_future(self.channel).result(timeout=60)
        self.stub = m["vllm_engine_pb2_grpc"].VllmEngineStub(self.channel)
        native = grpc.insecure_channel(args.native)
        grpc.channel_ready_future(native).result(timeout=60)
        self.native = m["inference_pb2_grpc"].InferenceStub(native)
        self.npb = m["inference_pb2"]
        self.counter = 0

    def rid(self, tag):
        self.counter += 1
        return "conf-%s-%d-%d" % (tag, os.getpid(), self.counter)

    def tokenize(self, text):
        return list(self.native.Tokenize(self.npb.TokenizeRequest(text=text), timeout=30).token_ids)

    def detokenize(self, ids):
        return self.native.Detokenize(self.npb.DetokenizeRequest(token_ids=ids), timeout=30).text

    def native_greedy(self, ids, max_tokens):
        start = self.npb.StartRequest(
            request_id=self.rid("native"), token_ids=self.npb.TokenIds(ids=ids),
            sampling=self.npb.SamplingParams(max_tokens=max_tokens, temperature=0.0,
                                             ignore_eos=True))
        out = []
        for resp in self.native.Generate(iter([self.npb.GenerateRequest(start=start)]), timeout=120):
            for c in resp.outputs:
                out.extend(c.token_ids)
        return out

    def request(self, ids, stream=False, rid=None, **sampling):
        return self.pb.GenerateRequest(
            request_id=rid or self.rid("gen"),
            tokenized=self.pb.TokenizedInput(input_ids=ids),
            sampling_params=self.pb.SamplingParams(**sampling), stream=stream)

    def generate(self, req, timeout=120):
        """(chunks, completes) of one call; raises grpc.RpcError on a status."""
        chunks, completes = [], []
        for r in self.stub.Generate(req, metadata=self.md, timeout=timeout):
            (chunks if r.WhichOneof("response") == "chunk" else completes).append(
                getattr(r, r.WhichOneof("response")))
        return chunks, completes

    def code_of(self, req):
        try:
            self.generate(req)
        except grpc.RpcError as e:
            return e.code(), e.details()
        return grpc.StatusCode.OK, ""


def test_auth_and_info(h):
    pb, common = h.pb, h.common
    try:
        h.stub.HealthCheck(pb.HealthCheckRequest(), timeout=10)
        check("HealthCheck without credential is refused", False, "it answered")
    except grpc.RpcError as e:
        check("HealthCheck without credential is refused",
              e.code() == grpc.StatusCode.UNAUTHENTICATED, e.code())
    r = h.stub.HealthCheck(pb.HealthCheckRequest(), metadata=h.md, timeout=10)
    check("HealthCheck healthy", r.healthy, r.message)
    r = h.stub.HealthCheck(pb.HealthCheckRequest(),
                           metadata=(("authorization", "Bearer " + h.secret),), timeout=10)
    check("HealthCheck with authorization: Bearer <secret>", r.healthy, r.message)
    info = h.stub.GetModelInfo(pb.GetModelInfoRequest(), metadata=h.md, timeout=10)
    check("GetModelInfo fields", info.is_generation and info.max_context_length > 0
          and info.vocab_size > 0 and len(info.eos_token_ids) > 0 and info.served_model_name
          and info.model_type, info)
    h.max_len = info.max_context_length
    h.vocab = info.vocab_size
    server = h.stub.GetServerInfo(pb.GetServerInfoRequest(), metadata=h.md, timeout=10)
    check("GetServerInfo fields", server.server_type == "vllm-grpc" and server.block_size > 0
          and server.max_num_seqs > 0 and server.data_parallel_size == 1, server)
    h.block_size = server.block_size
    loads = h.stub.GetLoads(pb.GetLoadsRequest(), metadata=h.md, timeout=10)
    check("GetLoads reports rank 0", loads.dp_rank_count == 1 and len(loads.loads) == 1
          and loads.loads[0].max_running_requests > 0 and loads.timestamp, loads)
    # Rill pools any model's final hidden states (a decoder's last token).
    emb = h.stub.Embed(pb.EmbedRequest(request_id=h.rid("embed"),
                                       tokenized=pb.TokenizedInput(input_ids=[1, 2, 3])),
                       metadata=h.md, timeout=60)
    check("Embed returns the pooled vector", emb.embedding_dim > 0
          and len(emb.embedding) == emb.embedding_dim and emb.prompt_tokens == 3,
          (emb.embedding_dim, len(emb.embedding), emb.prompt_tokens))
    embed_code = None
    try:
        h.stub.Embed(pb.EmbedRequest(request_id=h.rid("embed"), tokenized=pb.TokenizedInput()),
                     metadata=h.md, timeout=10)
    except grpc.RpcError as e:
        embed_code = e.code()
    check("Embed of an empty prompt is INVALID_ARGUMENT",
          embed_code == grpc.StatusCode.INVALID_ARGUMENT, embed_code)
    chunks = list(h.stub.GetTokenizer(common.GetTokenizerRequest(), metadata=h.md, timeout=60))
    blob = b"".join(c.data for c in chunks)
    check("GetTokenizer: sha256 on the last chunk only",
          chunks[-1].sha256 == hashlib.sha256(blob).hexdigest()
          and all(not c.sha256 for c in chunks[:-1]), [c.sha256 for c in chunks])
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        names = set(z.namelist())
        check("GetTokenizer: tokenizer.json + tokenizer_config.json",
              {"tokenizer.json", "tokenizer_config.json"} <= names, names)
        config = json.loads(z.read("tokenizer_config.json"))
        check("GetTokenizer: the chat template is in tokenizer_config.json",
              "{%" in config.get("chat_template", ""), config.keys())
        from tokenizers import Tokenizer
        hf = Tokenizer.from_str(z.read("tokenizer.json").decode())
    texts = ["Hello, world!", "  leading spaces and 12345 digits", "I'm sure it's fine",
             "<|im_start|>user\nHi<|im_end|>\n", "naïve café 你好 👋🏽", "tab\tand\nnewline  "]
    same = [(t, hf.encode(t).ids, h.tokenize(t)) for t in texts]
    check("GetTokenizer: the HF tokenizer encodes as Rill's own",
          all(a == b for _, a, b in same), [x for x in same if x[1] != x[2]])
    p = h.stub.StartProfile(common.StartProfileRequest(), metadata=h.md, timeout=10)
    check("StartProfile", p.success, p.message)
    h.generate(h.request(h.tokenize("Profile me"), max_tokens=2))
    p = h.stub.StopProfile(common.StopProfileRequest(), metadata=h.md, timeout=30)
    check("StopProfile writes a trace", p.success and os.path.exists(p.message), p.message)
    f = h.stub.FlushCache(common.FlushCacheRequest(), metadata=h.md, timeout=10)
    check("FlushCache", f.success, f.message)


def one_complete_per_index(name, completes, n):
    idx = sorted(c.index for c in completes)
    check(name + ": exactly one complete per index", idx == list(range(n)), idx)


def test_generate(h):
    prompt = h.tokenize("The capital of France is Paris. The capital of Germany is")
    ref = h.native_greedy(prompt, 12)
    chunks, completes = h.generate(h.request(prompt, max_tokens=12, temperature=0.0,
                                             ignore_eos=True))
    one_complete_per_index("greedy", completes, 1)
    c = completes[0]
    check("greedy tokens equal the native API's", list(c.output_ids) == ref,
          (list(c.output_ids), ref))
    check("greedy non-stream sends no chunks", not chunks, len(chunks))
    check("greedy finish length", c.finish_reason == "length", c.finish_reason)
    check("greedy counts", c.prompt_tokens == len(prompt) and c.completion_tokens == 12,
          (c.prompt_tokens, c.completion_tokens))

    chunks, completes = h.generate(h.request(prompt, stream=True, max_tokens=12,
                                             temperature=0.0, ignore_eos=True))
    one_complete_per_index("greedy stream", completes, 1)
    streamed = [t for ch in chunks for t in ch.token_ids]
    check("streamed tokens equal non-streamed", streamed == ref, (streamed, ref))
    check("stream complete closes the index without repeating tokens",
          not completes[0].output_ids and completes[0].completion_tokens == 12, completes[0])

    # n > 1, seeded: one complete per index, each reproducible.
    for stream in (False, True):
        req = h.request(prompt, stream=stream, n=3, max_tokens=6, temperature=1.0, seed=11,
                        ignore_eos=True)
        chunks, completes = h.generate(req)
        one_complete_per_index("n=3 stream=%s" % stream, completes, 3)
        if stream:
            per = {}
            for ch in chunks:
                per.setdefault(ch.index, []).extend(ch.token_ids)
            check("n=3 stream chunks carry every index", sorted(per) == [0, 1, 2]
                  and all(len(v) == 6 for v in per.values()), per)
        else:
            again = h.generate(h.request(prompt, n=3, max_tokens=6, temperature=1.0, seed=11,
                                         ignore_eos=True))[1]
            a = {c.index: list(c.output_ids) for c in completes}
            b = {c.index: list(c.output_ids) for c in again}
            check("n=3 with a seed is reproducible", a == b, (a, b))

    # Logprobs and prompt logprobs.
    _, completes = h.generate(h.request(prompt, max_tokens=5, temperature=0.0, ignore_eos=True,
                                        logprobs=2, prompt_logprobs=1))
    c = completes[0]
    lp = c.output_logprobs
    check("output logprobs per token", list(lp.token_ids) == list(c.output_ids)
          and len(lp.token_logprobs) == 5 and all(len(t.values) == 2 for t in lp.top_logprobs)
          and all(v <= 0 for v in lp.token_logprobs), lp)
    ip = c.input_logprobs
    check("prompt logprobs: one per prompt token, the first without a value",
          list(ip.token_ids) == prompt and not ip.token_logprobs[0].HasField("value")
          and all(t.HasField("value") for t in ip.token_logprobs[1:]), ip)
    chunks, _ = h.generate(h.request(prompt, stream=True, max_tokens=3, temperature=0.0,
                                     ignore_eos=True, logprobs=1, prompt_logprobs=0))
    check("stream: prompt logprobs in the first chunk only",
          len(chunks[0].input_logprobs.token_ids) == len(prompt)
          and all(not ch.input_logprobs.token_ids for ch in chunks[1:]), len(chunks))

    # Stop token ids -> matched_token_id.
    stop_tok = next(t for i, t in enumerate(ref) if i >= 2 and t not in ref[:i])
    cut = ref.index(stop_tok)
    _, completes = h.generate(h.request(prompt, max_tokens=12, temperature=0.0,
                                        stop_token_ids=[stop_tok]))
    c = completes[0]
    check("stop token: finish stop with matched_token_id",
          c.finish_reason == "stop" and c.WhichOneof("matched_stop") == "matched_token_id"
          and c.matched_token_id == stop_tok and list(c.output_ids) == ref[:cut + 1], c)

    # min_tokens holds the stop token back.
    _, completes = h.generate(h.request(prompt, max_tokens=12, temperature=0.0,
                                        stop_token_ids=[ref[0]], min_tokens=4))
    check("min_tokens: at least 4 tokens", len(completes[0].output_ids) >= 4, completes[0])

    # Stop strings -> matched_stop_str, the sample ends at the token that completed it.
    full = h.detokenize(ref)
    start = len(h.detokenize(ref[:4]))
    stop = full[start:start + 3]
    at = full.find(stop)
    for stream in (False, True):
        chunks, completes = h.generate(h.request(prompt, stream=stream, max_tokens=12,
                                                 temperature=0.0, ignore_eos=True, stop=[stop]))
        c = completes[0]
        ids = [t for ch in chunks for t in ch.token_ids] if stream else list(c.output_ids)
        text = h.detokenize(ids)
        check("stop string (stream=%s): finish stop, matched_stop_str" % stream,
              c.finish_reason == "stop" and c.matched_stop_str == stop and len(ids) < 12
              and text.startswith(full[:at]) and stop in text, (stop, c, text))

    test_stop_string_min_tokens(h, prompt)

    # logit_bias, penalties, seed.
    _, completes = h.generate(h.request(prompt, max_tokens=3, temperature=0.0, ignore_eos=True,
                                        logit_bias={ref[0]: -100.0}))
    check("logit_bias -100 removes the greedy token", completes[0].output_ids[0] != ref[0],
          completes[0].output_ids)
    _, completes = h.generate(h.request(prompt, max_tokens=8, temperature=0.0, ignore_eos=True,
                                        repetition_penalty=1.3, presence_penalty=0.5,
                                        frequency_penalty=0.5))
    check("penalties run", completes[0].finish_reason == "length", completes[0])
    a = h.generate(h.request(prompt, max_tokens=8, temperature=0.9, seed=5, ignore_eos=True))[1]
    b = h.generate(h.request(prompt, max_tokens=8, temperature=0.9, seed=5, ignore_eos=True))[1]
    check("seed reproduces", list(a[0].output_ids) == list(b[0].output_ids))
    _, completes = h.generate(h.request(prompt + prompt, max_tokens=2, temperature=0.0,
                                        truncate_prompt_tokens=len(prompt)))
    check("truncate_prompt_tokens keeps the last tokens", completes[0].prompt_tokens == len(prompt),
          completes[0].prompt_tokens)
    h.prompt = prompt


def expected_stop(h, ref, stop, min_tokens):
    """vLLM's rule: (tokens kept, text) of a greedy run over `ref` whose stop
    string must end in the text of a token after the first min_tokens."""
    for j in range(min_tokens + 1, len(ref) + 1):
        prev, cur = h.detokenize(ref[:j - 1]), h.detokenize(ref[:j])
        pos = cur.find(stop, max(0, len(prev) - len(stop) + 1))
        if pos >= 0:
            return j, cur[:pos]
    return None


def native_stop_run(h, ids, stop, min_tokens, max_tokens):
    """(token ids, text, finish reason, stop string) of a greedy native call."""
    start = h.npb.StartRequest(
        request_id=h.rid("native-stop"), token_ids=h.npb.TokenIds(ids=ids),
        sampling=h.npb.SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True,
                                      stop=[stop], min_tokens=min_tokens))
    toks, text, finish, stop_str = [], "", None, None
    for resp in h.native.Generate(iter([h.npb.GenerateRequest(start=start)]), timeout=120):
        for c in resp.outputs:
            toks.extend(c.token_ids)
            text += c.text
            if c.finish_reason:
                finish = h.npb.FinishReason.Name(c.finish_reason)
                stop_str = c.stop_string if c.WhichOneof("stop_reason") == "stop_string" else None
    return toks, text, finish, stop_str


def test_stop_string_min_tokens(h, prompt):
    """A stop string found in the first min_tokens tokens does not stop the
    sample (vLLM), in the VllmEngine API and in the native frontend alike."""
    # The stop string is a character of the first two tokens' text that
    # comes back later: without min_tokens it stops at once, with it later.
    ref = h.native_greedy(prompt, 24)
    head = [ch for ch in h.detokenize(ref[:2]) if not ch.isspace()]
    later = [ch for ch in head if expected_stop(h, ref, ch, 6)]
    stop = (later or head)[0]
    early = expected_stop(h, ref, stop, 0)
    check("min_tokens: the stop string occurs in the first tokens", early and early[0] <= 2,
          (stop, early))
    for min_tokens in (0, 3, 6):
        want = expected_stop(h, ref, stop, min_tokens)
        want_ids = ref[:want[0]] if want else ref
        for stream in (False, True):
            chunks, completes = h.generate(h.request(
                prompt, stream=stream, max_tokens=len(ref), temperature=0.0, ignore_eos=True,
                stop=[stop], min_tokens=min_tokens))
            c = completes[0]
            ids = [t for ch in chunks for t in ch.token_ids] if stream else list(c.output_ids)
            ok = ids == want_ids and (
                (c.finish_reason == "stop" and c.matched_stop_str == stop) if want
                else c.finish_reason == "length")
            check("VllmEngine stop %r min_tokens=%d stream=%s: ends where vLLM does"
                  % (stop, min_tokens, stream), ok and len(ids) > min_tokens,
                  (ids, want_ids, c.finish_reason, c.matched_stop_str))
        toks, text, finish, stop_str = native_stop_run(h, prompt, stop, min_tokens, len(ref))
        ok = (toks == want_ids and text == want[1] and finish == "FINISH_REASON_STOP"
              and stop_str == stop) if want else (toks == ref and finish == "FINISH_REASON_LENGTH")
        check("native stop %r min_tokens=%d: ends where vLLM does" % (stop, min_tokens), ok,
              (toks, want_ids, text, want, finish, stop_str))


def test_bad_inputs(h):
    pb = h.pb
    prompt = h.prompt
    cases = [
        ("temperature=-1", h.request(prompt, temperature=-1.0)),
        ("json_object=false", h.request(prompt, json_object=False)),
        ("empty prompt", h.request([])),
        ("text prompt", pb.GenerateRequest(request_id=h.rid("bad"), text="hi")),
        ("token id outside the vocabulary", h.request([h.vocab + 5])),
        ("n=1000", h.request(prompt, n=1000)),
        ("logprobs=50", h.request(prompt, logprobs=50)),
        ("logprobs=-1", h.request(prompt, logprobs=-1)),
        ("empty request_id", pb.GenerateRequest(tokenized=pb.TokenizedInput(input_ids=prompt))),
        ("prompt over max_model_len", h.request([1] * (h.max_len + 10), max_tokens=1)),
        ("top_p=2", h.request(prompt, top_p=2.0)),
    ]
    for name, req in cases:
        code, details = h.code_of(req)
        check("bad input %s -> INVALID_ARGUMENT" % name,
              code == grpc.StatusCode.INVALID_ARGUMENT and details and len(details) < 300,
              (code, details))
    code, details = h.code_of(cases[1][1])
    check("json_object=false message names the field", "json_object" in details, details)


# Structured outputs: the proto's constraint oneof (vLLM's
# StructuredOutputsParams) on the engine's grammar matcher.
STRUCTURED_PROMPT = "Answer with the requested value only.\nValue: "
PERSON_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "city": {"enum": ["Paris", "Rome"]}},
    "required": ["name", "age", "city"], "additionalProperties": False}


def constrained_text(h, prompt, stream=False, n=1, **sampling):
    """{index: (text, finish_reason)} of one constrained call."""
    chunks, completes = h.generate(h.request(prompt, stream=stream, n=n, max_tokens=48,
                                             **sampling))
    ids = {}
    for ch in chunks:
        ids.setdefault(ch.index, []).extend(ch.token_ids)
    for c in completes:
        ids.setdefault(c.index, []).extend(c.output_ids)
    finish = {c.index: c.finish_reason for c in completes}
    return {i: (h.detokenize(ids[i]), finish.get(i)) for i in sorted(ids)}


def test_structured_outputs(h):
    import re
    import jsonschema
    prompt = h.tokenize(STRUCTURED_PROMPT)
    for stream in (False, True):
        out = constrained_text(h, prompt, stream=stream, n=2, temperature=1.0, seed=7,
                               json_schema=json.dumps(PERSON_SCHEMA))
        ok, why = len(out) == 2, out
        for text, finish in out.values():
            try:
                jsonschema.validate(json.loads(text), PERSON_SCHEMA)
                ok = ok and finish == "stop"
            except (ValueError, jsonschema.ValidationError) as e:
                ok, why = False, (text, repr(e))
        check("json_schema (n=2, stream=%s): every sample validates, finish stop" % stream,
              ok, why)
    out = constrained_text(h, prompt, temperature=0.0, json_object=True)[0]
    try:
        parsed = json.loads(out[0])
    except ValueError:
        parsed = None
    check("json_object: a JSON object", isinstance(parsed, dict) and out[1] == "stop", out)
    pattern = r"[A-Z]{3}-[0-9]{2,4}"
    out = constrained_text(h, prompt, temperature=1.0, seed=3, regex=pattern)[0]
    check("regex: the output full-matches", re.fullmatch(pattern, out[0]) is not None
          and out[1] == "stop", out)
    choices = ["red", "green", "blue"]
    out = constrained_text(h, prompt, temperature=1.0, seed=5,
                           choice=h.pb.ChoiceConstraint(choices=choices))[0]
    check("choice: the output is one of the choices", out[0] in choices and out[1] == "stop", out)
    out = constrained_text(h, prompt, temperature=0.0,
                           grammar='root ::= "yes" | "no"')[0]
    check("grammar (EBNF): the output is in the language", out[0] in ("yes", "no"), out)

    # Bad constraints fail their own request, naming the problem, while a
    # free request running beside them finishes.
    free = {}

    def run_free():
        free["completes"] = h.generate(h.request(h.prompt, max_tokens=24, temperature=0.0,
                                                 ignore_eos=True))[1]
    t = threading.Thread(target=run_free)
    t.start()
    bad = [
        ("malformed json_schema", {"json_schema": '{"type": "object", "properties": {'},
         "json_schema"),
        ("json_schema of an unknown type", {"json_schema": '{"type": "no-such-type"}'},
         "json_schema"),
        ("invalid regex", {"regex": "([a-z"}, "regex"),
        ("EBNF syntax error", {"grammar": 'root ::= "a" | '}, "grammar"),
        ("json_schema with an unknown $ref", {"json_schema": '{"$ref": "#/$defs/missing"}'},
         "json_schema"),
        ("empty choice list", {}, "choice"),
    ]
    for name, constraint, word in bad:
        req = h.request(prompt, max_tokens=8, **constraint)
        if not constraint:
            req.sampling_params.choice.SetInParent()  # Present, with no choices.
        code, details = h.code_of(req)
        check("bad constraint %s -> INVALID_ARGUMENT naming %s" % (name, word),
              code == grpc.StatusCode.INVALID_ARGUMENT and word in details
              and len(details) < 400, (code, details))
    t.join(120)
    c = free.get("completes")
    check("a free request beside the bad constraints finishes",
          c is not None and c[0].finish_reason == "length" and len(c[0].output_ids) == 24, c)


def test_abort_and_cancel(h):
    pb = h.pb
    rid = h.rid("abort")
    seen = {"chunks": 0, "completes": []}
    dup = {}

    def run():
        long_run = h.request(h.prompt, stream=True, rid=rid, temperature=0.0, ignore_eos=True,
                             max_tokens=h.max_len - len(h.prompt) - 1)
        for r in h.stub.Generate(long_run,
                                 metadata=h.md, timeout=300):
            if r.WhichOneof("response") == "chunk":
                seen["chunks"] += 1
            else:
                seen["completes"].append(r.complete)
    t = threading.Thread(target=run)
    t.start()
    deadline = time.time() + 60
    while seen["chunks"] < 2 and time.time() < deadline:
        time.sleep(0.01)
    dup["code"] = h.code_of(h.request(h.prompt, rid=rid, max_tokens=2))[0]
    h.stub.Abort(pb.AbortRequest(request_ids=[rid, "no-such-request"]), metadata=h.md, timeout=10)
    t.join(60)
    check("a running request_id again -> ALREADY_EXISTS",
          dup["code"] == grpc.StatusCode.ALREADY_EXISTS, dup["code"])
    check("Abort ends the stream with one complete 'abort'",
          not t.is_alive() and len(seen["completes"]) == 1
          and seen["completes"][0].finish_reason == "abort", seen["completes"])

    # Client cancel aborts in the engine.
    call = h.stub.Generate(h.request(h.prompt, stream=True, max_tokens=h.max_len - len(h.prompt) - 1,
                                     temperature=0.0, ignore_eos=True), metadata=h.md, timeout=300)
    next(call)
    call.cancel()
    deadline = time.time() + 20
    active = None
    while time.time() < deadline:
        active = h.stub.GetServerInfo(pb.GetServerInfoRequest(), metadata=h.md,
                                      timeout=10).active_requests
        if active == 0:
            break
        time.sleep(0.1)
    check("client cancel aborts the request in the engine", active == 0, active)


def test_kv_events(h):
    common = h.common
    batches = []
    stop = threading.Event()
    call = h.stub.SubscribeKvEvents(common.SubscribeKvEventsRequest(), metadata=h.md, timeout=120)

    def read():
        try:
            for b in call:
                batches.append(b)
        except grpc.RpcError:
            pass
    t = threading.Thread(target=read)
    t.start()
    time.sleep(1.5)  # Subscribed (a heartbeat arrives meanwhile).
    prompt = h.tokenize("A brand new prompt about kv events, " * 6)[:3 * h.block_size + 3]
    h.generate(h.request(prompt, max_tokens=2, temperature=0.0))
    time.sleep(0.5)
    h.stub.FlushCache(common.FlushCacheRequest(), metadata=h.md, timeout=10)
    deadline = time.time() + 10
    while time.time() < deadline and not any(
            e.WhichOneof("data") == "cleared" for b in batches for e in b.events):
        time.sleep(0.1)
    call.cancel()
    t.join(10)
    stored = [e.stored for b in batches for e in b.events if e.WhichOneof("data") == "stored"]
    tokens = [t for s in stored for blk in s.blocks for t in blk.token_ids]
    want = prompt[:3 * h.block_size]
    check("KV events: the new prompt's full blocks are stored", tokens[:len(want)] == want,
          (len(stored), tokens[:8], want[:8]))
    chained = all(s.HasField("parent_block_hash") == (i > 0) for i, s in enumerate(stored[:3]))
    if len(stored) >= 2:
        chained = chained and stored[1].parent_block_hash == stored[0].blocks[0].block_hash
    check("KV events: blocks chain to their parents", chained, stored[:3])
    check("KV events: cleared after FlushCache",
          any(e.WhichOneof("data") == "cleared" for b in batches for e in b.events))
    seqs = [b.sequence_number for b in batches]
    check("KV events: sequence numbers never go back", seqs == sorted(seqs), seqs)
    real = [b.sequence_number for b in batches if b.events]
    check("KV events: event batches have increasing sequence numbers",
          all(b > a for a, b in zip(real, real[1:])), real)
    check("KV events: load records", all(b.HasField("load") for b in batches)
          and any(b.load.load_only for b in batches), [b.load for b in batches[:2]])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--secret_file", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--smg_proto_dir", default="proto/smg")
    ap.add_argument("--rill_proto_dir", default="proto")
    args = ap.parse_args()
    h = Harness(args, load_stubs(args.smg_proto_dir, args.rill_proto_dir))
    for test in (test_auth_and_info, test_generate, test_bad_inputs, test_structured_outputs,
                 test_abort_and_cancel, test_kv_events):
        try:
            test(h)
        except Exception as e:  # A crash in one section still runs the others.
            import traceback
            traceback.print_exc()
            check(test.__name__ + " ran to the end", False, repr(e))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
