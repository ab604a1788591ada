#!/usr/bin/env python3
"""Structured outputs through the real service (rill.v1.Inference over gRPC).

Against --target, on one Generate stream per phase:
  validity    10 JSON schemas, any JSON object, 4 regexes, a choice list, an
              arithmetic EBNF grammar and a structural tag, each with n samples (distinct seeds) at temperature 1.0:
              every sample must finish with "stop" and parse / validate
              (jsonschema with format checks) / full-match / be a choice.
  neighbours  free requests (greedy and seeded temperature 1.0) give bitwise
              the same token ids alone and beside constrained requests.
  greedy      a regex / choice that the free greedy output already satisfies
              leaves the greedy output unchanged.
  bad         malformed schema, invalid regex, EBNF syntax error, empty choice
              list, unknown $ref: INVALID_ARGUMENT naming the problem, while a
              free request on the same stream finishes normally.
Exits non-zero on the first failure, printing what was wrong.

  python tests/clients/structured_output_check.py --target 127.0.0.1:50051 --proto_dir proto
"""
import argparse
import importlib
import json
import os
import queue
import re
import sys
import tempfile
import time

SCHEMAS = {
    "nested": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12},
        "address": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 10},
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["city", "zip"], "additionalProperties": False}},
        "required": ["name", "address"], "additionalProperties": False},
    "array_bounds": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8},
                 "minItems": 1, "maxItems": 3}},
        "required": ["tags"], "additionalProperties": False},
    "enum": {"type": "object", "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "size": {"type": "string", "enum": ["S", "M", "L"]}},
        "required": ["color", "size"], "additionalProperties": False},
    "integer_bounds": {"type": "object", "properties": {
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "count": {"type": "integer", "minimum": -5, "maximum": 5}},
        "required": ["age", "count"], "additionalProperties": False},
    "number_bounds": {"type": "object", "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "ok": {"type": "boolean"}},
        "required": ["score", "ok"], "additionalProperties": False},
    "pattern_format": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
        "day": {"type": "string", "format": "date"}},
        "required": ["code", "day"], "additionalProperties": False},
    "optional": {"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 999},
        "note": {"type": "string", "maxLength": 10},
        "flag": {"type": "boolean"}},
        "required": ["id"], "additionalProperties": False},
    "refs": {"$defs": {"point": {"type": "object", "properties": {
        "x": {"type": "integer", "minimum": 0, "maximum": 9},
        "y": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["x", "y"], "additionalProperties": False}},
        "type": "object", "properties": {"a": {"$ref": "#/$defs/point"}, "b": {"$ref": "#/$defs/point"}},
        "required": ["a", "b"], "additionalProperties": False},
    "any_of": {"type": "object", "properties": {
        "value": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 99},
                            {"type": "string", "maxLength": 6}, {"type": "null"}]}},
        "required": ["value"], "additionalProperties": False},
    "array_of_objects": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
        "type": "object", "properties": {"k": {"type": "string", "maxLength": 5},
                                         "v": {"type": "integer", "minimum": 0, "maximum": 50}},
        "required": ["k", "v"], "additionalProperties": False}},
}

REGEXES = {
    "email": r"[a-z]{1,8}@[a-z]{1,8}\.(com|org|net)",
    "iso_date": r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    "ipv4": r"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
    "phone": r"\+1-[0-9]{3}-[0-9]{3}-[0-9]{4}",
}

CHOICES = ["Paris", "London", "Rome", "New York"]

# Arithmetic, finite (so every sample ends within max_tokens); its strings are
# a subset of what parse_arith (the unbounded grammar) accepts.
ARITH = r'''root ::= expr
expr ::= term | term op term | term op term op term
term ::= num | "(" num op num ")"
op ::= "+" | "-" | "*" | "/"
num ::= [1-9] [0-9]?'''

# "Answer: " then a JSON object of SCHEMAS["enum"] (xgrammar's structural tag).
STRUCTURAL_TAG = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
    {"type": "const_string", "value": "Answer: "},
    {"type": "json_schema", "json_schema": SCHEMAS["enum"]}]}}

PROMPT = "Answer with the requested value only.\nValue: "


def load_stubs(proto_dir):
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="rill_stubs_")
    rc = protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + out, "rill/v1/inference.proto"])
    if rc != 0:
        raise RuntimeError("protoc failed: %d" % rc)
    sys.path.insert(0, out)
    pb = importlib.import_module("rill.v1.inference_pb2")
    # Only the Generate stream is needed: one hand-made stub, no grpc plugin.
    return pb


class Client:
    def __init__(self, target, pb, timeout):
        import grpc
        self.pb = pb
        self.timeout = timeout
        ch = grpc.insecure_channel(target)
        grpc.channel_ready_future(ch).result(timeout=timeout)
        self.generate = ch.stream_stream(
            "/rill.v1.Inference/Generate",
            request_serializer=pb.GenerateRequest.SerializeToString,
            response_deserializer=pb.GenerateResponse.FromString)

    def run(self, starts):
        """Sends every StartRequest on one stream; returns {rid: result}."""
        pb = self.pb
        outbox = queue.Queue()
        for s in starts:
            outbox.put(pb.GenerateRequest(start=s))

        def requests():
            while True:
                item = outbox.get()
                if item is None:
                    return
                yield item

        res = {s.request_id: {"status": None, "samples": {}} for s in starts}
        left = set(res)
        for resp in self.generate(requests(), timeout=self.timeout):
            if resp.message_error.code != 0:
                raise AssertionError("message_error %s: %s" % (resp.request_id, resp.message_error.message))
            r = res[resp.request_id]
            for c in resp.outputs:
                s = r["samples"].setdefault(c.index, {"text": "", "ids": [], "finish": 0})
                s["text"] += c.text
                s["ids"].extend(c.token_ids)
                if c.finish_reason:
                    s["finish"] = c.finish_reason
            if resp.finished:
                r["status"] = (resp.status.code, resp.status.message)
                left.discard(resp.request_id)
                if not left:
                    outbox.put(None)
        return res


def start(pb, rid, n=1, temperature=1.0, seed=1, max_tokens=96, prompt=PROMPT, ignore_eos=False, **constraint):
    sp = pb.SamplingParams(n=n, temperature=temperature, seed=seed, max_tokens=max_tokens,
                           ignore_eos=ignore_eos)
    for k, v in constraint.items():
        if k == "choice":
            sp.choice.choices.extend(v)
        else:
            setattr(sp, k, v)
    return pb.StartRequest(request_id=rid, text=prompt, sampling=sp)


def parse_arith(s):
    """Recursive descent over ARITH; raises ValueError unless all of s parses."""
    pos = [0]

    def peek():
        return s[pos[0]] if pos[0] < len(s) else ""

    def num():
        m = re.match(r"[1-9][0-9]?", s[pos[0]:])
        if not m:
            raise ValueError("number expected at %d" % pos[0])
        pos[0] += m.end()

    def factor():
        if peek() == "(":
            pos[0] += 1
            expr()
            if peek() != ")":
                raise ValueError(") expected at %d" % pos[0])
            pos[0] += 1
        else:
            num()

    def term():
        factor()
        while peek() in ("*", "/") and peek():
            pos[0] += 1
            factor()

    def expr():
        term()
        while peek() in ("+", "-") and peek():
            pos[0] += 1
            term()

    expr()
    if pos[0] != len(s):
        raise ValueError("trailing text at %d" % pos[0])


def regex_literal(text):
    """A regex matching exactly `text` (xgrammar's regex syntax)."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append(r"\n")
        elif ch in "\\^$.|?*+()[]{}":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def check_ok(rid, r, n):
    code, msg = r["status"]
    assert code == 0, "%s failed: %d %s" % (rid, code, msg)
    assert len(r["samples"]) == n, "%s: %d samples, want %d" % (rid, len(r["samples"]), n)


def validity(client, pb, n, free_form_n):
    """n samples per schema, regex, choice and grammar; free_form_n for any
    JSON object and the structural tag (see --free_form_samples)."""
    import jsonschema
    starts = []
    for name, schema in SCHEMAS.items():
        starts.append(start(pb, "schema-" + name, n=n, seed=11, json_schema=json.dumps(schema)))
    for name, rx in REGEXES.items():
        starts.append(start(pb, "regex-" + name, n=n, seed=12, regex=rx))
    starts.append(start(pb, "choice", n=n, seed=13, choice=CHOICES))
    starts.append(start(pb, "arith", n=n, seed=14, grammar=ARITH, max_tokens=48))
    starts.append(start(pb, "json-object", n=free_form_n, seed=15, json_object=True, max_tokens=512))
    starts.append(start(pb, "structural-tag", n=free_form_n, seed=16, max_tokens=192,
                        structural_tag=json.dumps(STRUCTURAL_TAG)))
    t0 = time.time()
    res = client.run(starts)
    counts = {"json": 0, "regex": 0, "choice": 0, "grammar": 0}
    for rid, r in res.items():
        check_ok(rid, r, free_form_n if rid in ("json-object", "structural-tag") else n)
        for i, s in sorted(r["samples"].items()):
            text = s["text"]
            where = "%s[%d] %r" % (rid, i, text)
            assert s["finish"] == pb.FINISH_REASON_STOP, "%s: finish %d (not stop)" % (where, s["finish"])
            if rid.startswith("schema-"):
                schema = SCHEMAS[rid[len("schema-"):]]
                jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
                counts["json"] += 1
            elif rid == "structural-tag":
                assert text.startswith("Answer: "), "no prefix: " + where
                jsonschema.validate(json.loads(text[len("Answer: "):]), SCHEMAS["enum"])
                counts["json"] += 1
            elif rid == "json-object":
                json.loads(text)
                counts["json"] += 1
            elif rid.startswith("regex-"):
                assert re.fullmatch(REGEXES[rid[len("regex-"):]], text), "no full match: " + where
                counts["regex"] += 1
            elif rid == "choice":
                assert text in CHOICES, "not a choice: " + where
                counts["choice"] += 1
            else:
                parse_arith(text)
                counts["grammar"] += 1
    return {"valid": counts, "seconds": round(time.time() - t0, 1)}


def neighbours(client, pb):
    free = [start(pb, "free-greedy", temperature=0.0, max_tokens=24, ignore_eos=True,
                  prompt="The capital of France is"),
            start(pb, "free-sampled", temperature=1.0, seed=7, max_tokens=24, ignore_eos=True,
                  prompt="Once upon a time")]
    alone = client.run(free)
    constrained = [start(pb, "c-schema", n=2, seed=3, json_schema=json.dumps(SCHEMAS["nested"])),
                   start(pb, "c-regex", seed=4, regex=REGEXES["ipv4"])]
    # The free requests again (same ids, new stream) beside the constrained ones.
    mixed = client.run(constrained + free)
    for rid in ("free-greedy", "free-sampled"):
        check_ok(rid, alone[rid], 1)
        check_ok(rid, mixed[rid], 1)
        a, b = alone[rid]["samples"][0]["ids"], mixed[rid]["samples"][0]["ids"]
        assert a == b, "%s changed beside constrained requests:\n alone %s\n mixed %s" % (rid, a, b)
    for rid in ("c-schema", "c-regex"):
        check_ok(rid, mixed[rid], len(mixed[rid]["samples"]))
    return {"unchanged": 2}


def greedy(client, pb):
    prompt = "The capital of France is"
    free = client.run([start(pb, "g-free", temperature=0.0, max_tokens=8, ignore_eos=True, prompt=prompt)])
    check_ok("g-free", free["g-free"], 1)
    s = free["g-free"]["samples"][0]
    text, ids = s["text"], s["ids"]
    res = client.run([
        start(pb, "g-regex", temperature=0.0, max_tokens=8, ignore_eos=True, prompt=prompt,
              regex=regex_literal(text)),
        start(pb, "g-choice", temperature=0.0, max_tokens=8, ignore_eos=True, prompt=prompt,
              choice=[text, text + " and more", "Nothing"])])
    for rid in ("g-regex", "g-choice"):
        check_ok(rid, res[rid], 1)
        got = res[rid]["samples"][0]["ids"]
        assert got == ids, "%s: constrained greedy %s != free greedy %s (%r)" % (rid, got, ids, text)
    return {"greedy_text": text}


def bad(client, pb):
    cases = {
        "bad-schema": ({"json_schema": '{"type": "object", "properties": {'}, "json_schema"),
        "bad-type": ({"json_schema": '{"type": "no-such-type"}'}, "json_schema"),
        "bad-regex": ({"regex": "([a-z]+"}, "regex"),
        "bad-ebnf": ({"grammar": 'root ::= "a" | '}, "grammar"),
        "bad-ref": ({"json_schema": '{"$ref": "#/$defs/missing"}'}, "json_schema"),
        # Refused by the frontend's shape check, before the engine.
        "bad-choice": ({"choice": []}, "choice list is empty"),
        "bad-json-object": ({"json_object": False}, "json_object: must be true"),
    }
    starts = [start(pb, rid, **kw) for rid, (kw, _) in cases.items()]
    starts.append(start(pb, "bad-neighbour", temperature=0.0, max_tokens=6, ignore_eos=True))
    res = client.run(starts)
    messages = {}
    for rid, (_, want) in cases.items():
        code, msg = res[rid]["status"]
        assert code == 3, "%s: code %d (%s), want INVALID_ARGUMENT" % (rid, code, msg)
        assert want in msg, "%s: message %r does not name %s" % (rid, msg, want)
        messages[rid] = msg[:160]
    check_ok("bad-neighbour", res["bad-neighbour"], 1)
    assert len(res["bad-neighbour"]["samples"][0]["ids"]) == 6
    return {"refused": messages}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--proto_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "proto"))
    ap.add_argument("--samples", type=int, default=3, help="samples (seeds) per constraint")
    # Any JSON object, and the JSON after a structural tag's trigger, have no
    # length bound (long strings; the grammar's free whitespace): at
    # temperature 1.0 a sample may still be going at max_tokens and finish
    # with "length", which this check fails. They get their own (smaller)
    # count and more tokens (512, 192).
    ap.add_argument("--free_form_samples", type=int, default=None,
                    help="samples of the json_object and structural_tag requests (default: --samples)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--phases", default="bad,greedy,neighbours,validity",
                    help="comma-separated subset of bad, greedy, neighbours, validity")
    args = ap.parse_args()
    pb = load_stubs(args.proto_dir)
    client = Client(args.target, pb, args.timeout)
    phases = {"bad": lambda: bad(client, pb), "greedy": lambda: greedy(client, pb),
              "neighbours": lambda: neighbours(client, pb),
              "validity": lambda: validity(client, pb, args.samples,
                                           args.free_form_samples or args.samples)}
    report = {}
    for name in args.phases.split(","):
        report[name] = phases[name]()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
