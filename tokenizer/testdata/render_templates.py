#!/usr/bin/env python3
"""Renders chat templates with jinja2 the way transformers' apply_chat_template
does, as the reference for chat_template_test.

Usage: render_templates.py OUT.json [--gguf MODEL.gguf] [--templates DIR]
                           [--seed N] [--now UNIX_TIME]

DIR holds what tools/fetch_llama_cpp_test_data.sh extracts: templates/*.jinja and
llama_chat_format.py (its *_CHAT_TEMPLATE strings). Writes
{"templates": {name: source}, "compile_errors": {name: message},
 "cases": [{template, messages, add_generation_prompt, kwargs, [tools, documents,
            continue_final_message], output | error + error_type + raised}]}.
Messages may carry name, tool_call_id and tool_calls (arguments as objects, as
vLLM hands them to templates) and content_parts (text parts; content holds them
joined); kwargs values are of any JSON type. "content_formats" maps each
template to vLLM's content format ("openai" or "string", content_format()).
"""
import argparse
import ast
import datetime
import json
import os
import random

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

CHATML_SYS = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
              "{{ '<|im_start|>system\\nYou are a helpful assistant<|im_end|>\\n' }}{% endif %}"
              "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
              "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
          "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
          "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
          "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
          "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
          "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
          "{% endfor %}")

# Every JSON type as a template variable (chat_template_kwargs).
KWARGS_PROBE = ("{{ flag }}|{{ n + 1 }}|{{ f }}|{{ s }}|{{ l|tojson }}|{{ l[1] }}|{{ o|tojson }}|{{ o.k }}|"
                "{{ none is none }}|{{ n is integer }}|{{ f is float }}|{{ o is mapping }}|"
                "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
                "{% if add_generation_prompt %}<gen>{% endif %}")
KWARGS_PROBE_VALUES = {"flag": False, "n": 41, "f": 2.5, "s": "é\"x", "l": [1, "two", None, True, 3.0],
                       "o": {"k": "v", "nested": {"z": [1]}, "a": 0}, "none": None}

PIECES = ["hello", " ", "  ", "\n", "\t", "wörld", "你好", "😀", "'", '"', "{{ x }}",
          "<|im_end|>", "\u00a0", "\x1c", "123", "[INST]", "<think>", "</think>"]


def msg(role, content):
    return {"role": role, "content": content}


# Conversations every template is rendered with (plus random ones).
FIXED = [
    [msg("user", "Hello")],
    [msg("system", "You are a helpful assistant."), msg("user", "What is 2+2?")],
    [msg("user", "Hi"), msg("assistant", "Hello! How can I help?"), msg("user", "Tell me a joke.")],
    [msg("system", "Be brief."), msg("user", "Hi"), msg("assistant", "Hey."), msg("user", "Bye")],
    [msg("system", "S"), msg("user", "Q"), msg("assistant", "A")],
    [msg("user", "  padded  \n"), msg("assistant", "\n answer with spaces \n")],
    [msg("user", "Solve x"), msg("assistant", "<think>\nreasoning here\n</think>\n\nThe answer is 4."),
     msg("user", "Thanks")],
    [msg("user", "a"), msg("user", "b")],
    [msg("assistant", "I start"), msg("user", "ok")],
    [msg("user", "")],
    [msg("user", "Ünïcödé 你好 😀 \u00a0end")],
]


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
SEARCH_TOOL = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "max_results": {"type": "integer", "minimum": 1, "maximum": 10},
        "min_score": {"type": "number", "default": 0.5}},
        "required": ["query"]}}}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]
DOCUMENTS = [{"title": "Paris", "text": "Paris is the capital of France."},
             {"title": "Weather", "text": "It rains in Paris 111 days a year."}]


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_result(call_id, name, content):
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


ASK = msg("user", "What is the weather in Paris?")
CALL = dict(msg("assistant", ""), tool_calls=[call("call00001", "get_weather", {"city": "Paris", "unit": "celsius"})])
RESULT = tool_result("call00001", "get_weather", '{"temperature": 21, "sky": "clear"}')
# Conversations with tool definitions: a request, an assistant's call and the
# tool's result (one call, then two in parallel), the answer after it.
TOOL_CONVS = [
    [ASK],
    [msg("system", "You can call tools."), ASK],
    [ASK, CALL, RESULT],
    [msg("system", "You can call tools."), ASK, CALL, RESULT, msg("assistant", "It is 21 °C and clear."),
     msg("user", "Thanks")],
    [msg("user", "Weather in Paris and news about it?"),
     dict(msg("assistant", "Let me check."),
          tool_calls=[call("call00001", "get_weather", {"city": "Paris"}),
                      call("call00002", "search", {"query": "Paris news", "max_results": 3})]),
     RESULT, tool_result("call00002", "search", "Nothing new.")],
]
# Conversations whose last message is the assistant's, to continue.
def parts(role, *texts):
    """A message given as text parts (rill.v1 ChatMessage.content_parts)."""
    return {"role": role, "content": "\n".join(texts), "content_parts": list(texts)}


# Conversations with a message given as text parts: the template gets them as
# [{"type": "text", "text": ...}] when it iterates message content (vLLM's
# "openai" content format), else joined with "\n" (its "string" format).
PARTS_CONVS = [
    [parts("user", "First part.", "Second part.")],
    [msg("system", "Be brief."), parts("user", "Look:", " spaced ", "end")],
    [parts("user", "Hi"), msg("assistant", "Hello!"), parts("user", "One", "Two")],
]
PARTS_CONTINUE_CONVS = [
    [msg("user", "Write a haiku"), parts("assistant", "Autumn", "moonlight")],
]


def _is_var(node, name):
    return isinstance(node, nodes.Name) and node.name == name


def _is_key_of(node, name, key):
    if isinstance(node, nodes.Getattr):
        return node.attr == key and _is_var(node.node, name)
    if isinstance(node, nodes.Getitem):
        return (isinstance(node.arg, nodes.Const) and node.arg.value == key
                and _is_var(node.node, name))
    return False


def _is_var_or_elems(node, name, key=None):
    if isinstance(node, (nodes.Filter, nodes.Test)):
        return node.node is not None and _is_var_or_elems(node.node, name, key)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
        return _is_var_or_elems(node.node, name, key)
    return _is_key_of(node, name, key) if key else _is_var(node, name)


def content_format(env, source):
    """vLLM's detection of a template's content format, on jinja2's own tree:
    "openai" when a {% for %} iterates the content of a message that a loop
    over `messages` (or a name set from it) yields, else "string"."""
    root = env.parse(source)
    lists, pending = ["messages"], ["messages"]
    while pending:
        name = pending.pop(0)
        for a in root.find_all(nodes.Assign):
            if (isinstance(a.target, nodes.Name) and _is_var_or_elems(a.node, name)
                    and a.target.name not in lists):
                lists.append(a.target.name)
                pending.append(a.target.name)
    message_vars = []
    for loop in root.find_all(nodes.For):
        if isinstance(loop.target, nodes.Name) and any(_is_var_or_elems(loop.iter, l) for l in lists):
            message_vars.append(loop.target.name)
    for loop in root.find_all(nodes.For):
        if any(_is_var_or_elems(loop.iter, m, "content") for m in message_vars):
            return "openai"
    return "string"


def template_messages(msgs, fmt):
    """What the template gets: parts as a list under "openai", else joined."""
    out = []
    for m in msgs:
        m = dict(m)
        p = m.pop("content_parts", None)
        if p is not None and fmt == "openai":
            m["content"] = [{"type": "text", "text": t} for t in p]
        out.append(m)
    return out


CONTINUE_CONVS = [
    [msg("user", "Write a haiku"), msg("assistant", "Autumn moonlight")],
    [msg("system", "Be brief."), msg("user", "Count"), msg("assistant", "1, 2, ")],
    [msg("user", "Hi"), msg("assistant", "  Hello there \n")],
]


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    pass


def raise_exception(message):
    raise RaisedByTemplate(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' replacement for jinja2's tojson (no HTML escaping).
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class AssistantTracker(jinja2.ext.Extension):
    # transformers' {% generation %} tag; without return_assistant_tokens_mask
    # it renders its body unchanged.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env(now):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.fromtimestamp(now).strftime(fmt)
    return env


def load_templates(a):
    templates = {"builtin:chatml_default_system": CHATML_SYS, "builtin:chatml": CHATML,
                 "builtin:llama3": LLAMA3, "builtin:llama2": LLAMA2, "builtin:kwargs_probe": KWARGS_PROBE}
    if a.gguf:
        import gguf
        r = gguf.GGUFReader(a.gguf)
        templates["default-model"] = bytes(r.fields["tokenizer.chat_template"].parts[-1]).decode()
    if a.templates:
        tdir = os.path.join(a.templates, "templates")
        for f in sorted(os.listdir(tdir)):
            if f.endswith(".jinja"):
                with open(os.path.join(tdir, f), encoding="utf-8") as fh:
                    templates[f] = fh.read()
        with open(os.path.join(a.templates, "llama_chat_format.py"), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id.endswith("_CHAT_TEMPLATE") and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                templates["llama_chat_format:" + node.targets[0].id] = node.value.value
    return templates


def random_conversation(rng):
    msgs = []
    roles = ["user", "assistant"]
    for k in range(rng.randrange(1, 6)):
        role = rng.choice(["system", "user", "assistant"]) if rng.random() < 0.3 else roles[k % 2]
        content = "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 8)))
        msgs.append(msg(role, content))
    return msgs


def continue_final_message(rendered, messages):
    # transformers' apply_chat_template(continue_final_message=True): the text
    # up to the end of the last message's content.
    final = messages[-1]["content"]
    if isinstance(final, list):  # transformers: parts end with the last one's text
        final = final[-1]["text"]
    if final.strip() not in rendered:
        raise ValueError("continue_final_message: the final message does not appear in the chat")
    at = rendered.rindex(final.strip())
    if rendered[at:at + len(final.lstrip())] == final:
        return rendered[:at + len(final.lstrip())]
    return rendered[:at + len(final.strip())]


def cases_for(name, source, rng, random_count):
    """(messages, add_generation_prompt, extra fields of the case) to render."""
    variants = [{}]
    if "enable_thinking" in source:
        variants += [{"enable_thinking": False}, {"enable_thinking": True}]
    if name == "builtin:kwargs_probe":
        variants = [KWARGS_PROBE_VALUES]
    out = [(m, gen, {"kwargs": kw}) for m in FIXED for gen in (True, False) for kw in variants]
    out += [(random_conversation(rng), rng.random() < 0.5, {"kwargs": {}}) for _ in range(random_count)]
    if "tools" in source or "tool_calls" in source:
        out += [(m, gen, {"kwargs": {}, "tools": TOOLS}) for m in TOOL_CONVS for gen in (True, False)]
        out += [(m, True, {"kwargs": {}}) for m in TOOL_CONVS[2:]]  # Tool history, no definitions.
    if "documents" in source:
        out += [(m, True, {"kwargs": {}, "documents": DOCUMENTS}) for m in FIXED[:2]]
    out += [(m, False, {"kwargs": kw, "continue_final_message": True})
            for m in CONTINUE_CONVS for kw in variants]
    out += [(m, gen, {"kwargs": {}}) for m in PARTS_CONVS for gen in (True, False)]
    out += [(m, False, {"kwargs": {}, "continue_final_message": True}) for m in PARTS_CONTINUE_CONVS]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--gguf")
    ap.add_argument("--templates")
    ap.add_argument("--seed", type=int, default=99)
    ap.add_argument("--random", type=int, default=12, help="random conversations per template")
    ap.add_argument("--now", type=int, default=1767225600)
    a = ap.parse_args()
    env = make_env(a.now)
    rng = random.Random(a.seed)
    templates = load_templates(a)
    compile_errors = {}
    formats = {}
    cases = []
    for name, source in templates.items():
        try:
            tmpl = env.from_string(source)
        except jinja2.exceptions.TemplateError as e:
            compile_errors[name] = "%s: %s" % (type(e).__name__, e)
            continue
        formats[name] = content_format(env, source)
        for msgs, gen, extra in cases_for(name, source, rng, a.random):
            case = dict({"template": name, "messages": msgs, "add_generation_prompt": gen}, **extra)
            try:
                # Each render gets its own copy, as each request has its own.
                msgs = template_messages(json.loads(json.dumps(msgs)), formats[name])
                output = tmpl.render(messages=msgs, tools=extra.get("tools"), documents=extra.get("documents"),
                                     add_generation_prompt=gen, bos_token="<s>", eos_token="</s>",
                                     **extra["kwargs"])
                if extra.get("continue_final_message"):
                    output = continue_final_message(output, msgs)
                case["output"] = output
            except Exception as e:  # pylint: disable=broad-except
                case["error"] = str(e)
                case["error_type"] = type(e).__name__
                case["raised"] = isinstance(e, RaisedByTemplate)
            cases.append(case)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"now": a.now, "templates": templates, "compile_errors": compile_errors,
                   "content_formats": formats, "cases": cases}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
