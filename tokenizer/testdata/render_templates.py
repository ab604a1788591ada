#!/usr/bin/env python3
"""Renders chat templates with jinja2 the way transformers' apply_chat_template
does, as the reference for chat_template_test.

Usage: render_templates.py OUT.json [--gguf MODEL.gguf] [--templates DIR]
                           [--seed N] [--now UNIX_TIME]

DIR holds what tools/fetch_llama_cpp_test_data.sh extracts: templates/*.jinja and
llama_chat_format.py (its *_CHAT_TEMPLATE strings). Writes
{"templates": {name: source}, "compile_errors": {name: message},
 "cases": [{template, messages, add_generation_prompt, kwargs,
            output | error + error_type + raised}]}.
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
                 "builtin:llama3": LLAMA3, "builtin:llama2": LLAMA2}
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
    cases = []
    for name, source in templates.items():
        try:
            tmpl = env.from_string(source)
        except jinja2.exceptions.TemplateError as e:
            compile_errors[name] = "%s: %s" % (type(e).__name__, e)
            continue
        variants = [{}]
        if "enable_thinking" in source:
            variants += [{"enable_thinking": False}, {"enable_thinking": True}]
        convs = [(m, gen, kw) for m in FIXED for gen in (True, False) for kw in variants]
        convs += [(random_conversation(rng), rng.random() < 0.5, {}) for _ in range(a.random)]
        for msgs, gen, kwargs in convs:
            case = {"template": name, "messages": msgs, "add_generation_prompt": gen, "kwargs": kwargs}
            try:
                case["output"] = tmpl.render(messages=msgs, tools=None, documents=None,
                                             add_generation_prompt=gen, bos_token="<s>", eos_token="</s>",
                                             **kwargs)
            except Exception as e:  # pylint: disable=broad-except
                case["error"] = str(e)
                case["error_type"] = type(e).__name__
                case["raised"] = isinstance(e, RaisedByTemplate)
            cases.append(case)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"now": a.now, "templates": templates, "compile_errors": compile_errors, "cases": cases},
                  f, ensure_ascii=False)


if __name__ == "__main__":
    main()
