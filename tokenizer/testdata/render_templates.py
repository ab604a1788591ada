#!/usr/bin/env python3
"""Renders chat templates with jinja2 (HF settings) for chat_template_test.

Usage: render_templates.py OUT.json [--gguf MODEL.gguf] [--seed N]
Writes a list of {template, messages, add_generation_prompt, output|error}.
"""
import argparse
import json
import random

import jinja2
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
          "<|im_end|>", "\u00a0", "\x1c", "123", "[INST]"]


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--gguf")
    ap.add_argument("--seed", type=int, default=99)
    a = ap.parse_args()
    templates = [CHATML_SYS, CHATML, LLAMA3, LLAMA2]
    if a.gguf:
        import gguf
        r = gguf.GGUFReader(a.gguf)
        templates.insert(0, bytes(r.fields["tokenizer.chat_template"].parts[-1]).decode())
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    rng = random.Random(a.seed)
    cases = []
    for t in templates:
        tmpl = env.from_string(t)
        for _ in range(60):
            msgs = []
            roles = ["user", "assistant"]
            for k in range(rng.randrange(1, 6)):
                role = rng.choice(["system", "user", "assistant"]) if rng.random() < 0.3 \
                    else roles[k % 2]
                content = "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 8)))
                msgs.append({"role": role, "content": content})
            gen = rng.random() < 0.5
            case = {"template": t, "messages": msgs, "add_generation_prompt": gen}
            try:
                case["output"] = tmpl.render(messages=msgs, add_generation_prompt=gen,
                                             bos_token="<s>", eos_token="</s>")
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            cases.append(case)
    with open(a.out, "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()
