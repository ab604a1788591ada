#!/usr/bin/env python3
"""Structured outputs through `rill serve --openai_port` (the smg gateway in
front of rill-engine's VllmEngine service) with the official openai SDK:

  response_format json_schema   the content validates against the schema
  response_format json_object   the content parses as a JSON object
  tool_choice "required"        a tool call whose arguments validate
  tool_choice named function    a call of that function, arguments validate
  bad schema                    a 400, and the next request still answers

smg 1.13 turns each of these into the proto's constraint oneof (json_schema);
the engine compiles it and masks the logits. Each check prints PASS/FAIL; the
exit code is the number of failures.

  python tests/clients/openai_structured_check.py --base_url http://127.0.0.1:8000/v1
"""
import argparse
import json
import sys

import jsonschema
import openai

from check_report import check, summary

# Small enough for a SmolLM2-class model to finish well within max_tokens.
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "city": {"enum": ["Paris", "Rome", "Berlin"]}},
    "required": ["name", "age", "city"], "additionalProperties": False}

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city.",
        "parameters": WEATHER}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string",
                                                                 "maxLength": 12}},
                       "required": ["city"], "additionalProperties": False}}},
]


def validates(text, schema):
    """(ok, why): `text` parses as JSON and validates against `schema`."""
    try:
        jsonschema.validate(json.loads(text), schema)
        return True, text
    except (TypeError, ValueError, jsonschema.ValidationError) as e:
        return False, (text, repr(e)[:300])


def check_tool_calls(name, chat, want_function=None):
    msg = chat.choices[0].message
    calls = msg.tool_calls or []
    ok, why = bool(calls), (msg, chat.choices[0].finish_reason)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for call in calls:
        fn = call.function
        if fn.name not in schemas or (want_function and fn.name != want_function):
            ok, why = False, ("unexpected function", fn.name)
            break
        good, detail = validates(fn.arguments, schemas[fn.name])
        if not good:
            ok, why = False, detail
            break
    check(name, ok, why)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base_url", required=True)
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="unused", timeout=120, max_retries=0)
    model = client.models.list().data[0].id

    person = [{"role": "user", "content":
               "Describe a person as JSON with their name, age and city."}]
    for temperature in (0.0, 1.0):
        chat = client.chat.completions.create(
            model=model, messages=person, max_tokens=64, temperature=temperature, seed=1,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": PERSON,
                                             "strict": True}})
        ok, why = validates(chat.choices[0].message.content, PERSON)
        check("response_format json_schema (temperature %g): the content validates"
              % temperature, ok and chat.choices[0].finish_reason == "stop",
              (why, chat.choices[0].finish_reason))

    parts, finish = [], None
    for ev in client.chat.completions.create(
            model=model, messages=person, max_tokens=64, temperature=0, stream=True,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": PERSON}}):
        for c in ev.choices:
            parts.append(c.delta.content or "")
            finish = c.finish_reason or finish
    ok, why = validates("".join(parts), PERSON)
    check("response_format json_schema, streamed: the content validates",
          ok and finish == "stop", (why, finish))

    chat = client.chat.completions.create(
        model=model, max_tokens=64, temperature=0, response_format={"type": "json_object"},
        messages=[{"role": "user", "content":
                   'Reply with a JSON object like {"name": "Alice", "age": 30}.'}])
    ok, why = validates(chat.choices[0].message.content, {"type": "object"})
    check("response_format json_object: the content is a JSON object",
          ok and chat.choices[0].finish_reason == "stop", (why, chat.choices[0].finish_reason))

    weather = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
    chat = client.chat.completions.create(model=model, messages=weather, max_tokens=96,
                                          temperature=0, tools=TOOLS, tool_choice="required")
    check_tool_calls("tool_choice required: tool calls whose arguments validate", chat)
    chat = client.chat.completions.create(
        model=model, messages=weather, max_tokens=64, temperature=0, tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    check_tool_calls("tool_choice get_weather: its arguments validate", chat, "get_weather")

    # A schema the engine cannot compile fails that request alone.
    try:
        client.chat.completions.create(
            model=model, messages=person, max_tokens=8,
            response_format={"type": "json_schema", "json_schema": {
                "name": "bad", "schema": {"$ref": "#/$defs/missing"}}})
        check("unknown $ref in the schema -> 400", False, "accepted")
    except openai.BadRequestError as e:
        check("unknown $ref in the schema -> 400", e.status_code == 400, e)
    except openai.APIStatusError as e:
        check("unknown $ref in the schema -> 400", False, (e.status_code, e.message))
    after = client.chat.completions.create(model=model, messages=person, max_tokens=4,
                                           temperature=0)
    check("a request after the bad schema answers", after.usage.completion_tokens > 0, after)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
