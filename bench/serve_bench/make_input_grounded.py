#!/usr/bin/env python3
"""Writes data/input_grounded.jsonl: prompts whose answer mostly copies the input.

Summarise, edit, and repeat-with-changes requests over short original texts
(written for this file: notes, a story, code, a recipe, a config, a list), the
case where prompt-lookup (n-gram) speculation finds its drafts in the prompt.
`python3 bench/serve_bench/make_input_grounded.py` rewrites the file byte for
byte; each prompt's output_len is about the length of the text it copies.
"""
import argparse
import json

TEXTS = {
    "notes": (
        "Meeting notes, Tuesday. Attendees: Mara, Jonas, Priya, and Tom. The team agreed to move "
        "the release from the 14th to the 21st because the payment tests are still failing on the "
        "staging cluster. Jonas will fix the flaky retry test by Thursday. Priya will write the "
        "migration guide for the new configuration format. Tom raised the question of whether the "
        "old API should stay available for one more month; the team decided it will, with a "
        "warning in the logs. Next meeting: Monday at ten."),
    "story": (
        "The lighthouse keeper climbed the stairs every evening at six. There were one hundred and "
        "twelve steps, and he counted them out loud, because his father had counted them before "
        "him. At the top he wiped the glass, lit the lamp, and wrote the weather in a small green "
        "book. On the night of the storm the lamp went out twice. Both times he relit it with "
        "shaking hands, and both times he wrote the time in the green book, as if the book could "
        "keep the ships safe by remembering them."),
    "code": (
        "def mean(values):\n"
        "    total = 0\n"
        "    for v in values:\n"
        "        total = total + v\n"
        "    return total / len(values)\n"
        "\n"
        "def variance(values):\n"
        "    m = mean(values)\n"
        "    total = 0\n"
        "    for v in values:\n"
        "        total = total + (v - m) * (v - m)\n"
        "    return total / len(values)\n"),
    "recipe": (
        "Tomato soup for four. Ingredients: 1 kg ripe tomatoes, 2 onions, 3 cloves of garlic, "
        "2 tablespoons of olive oil, 1 litre of vegetable stock, salt, pepper, and a handful of "
        "basil. Steps: chop the onions and garlic and soften them in the oil for ten minutes. Add "
        "the chopped tomatoes and cook for another ten minutes. Pour in the stock and simmer for "
        "twenty minutes. Blend until smooth, season with salt and pepper, and serve with torn "
        "basil on top."),
    "config": (
        "server:\n"
        "  port: 8080\n"
        "  workers: 4\n"
        "  timeout_seconds: 30\n"
        "database:\n"
        "  host: db.internal\n"
        "  port: 5432\n"
        "  name: orders\n"
        "  pool_size: 10\n"
        "logging:\n"
        "  level: info\n"
        "  format: json\n"),
    "list": (
        "Packing list for the hiking trip:\n"
        "- rain jacket\n"
        "- two pairs of wool socks\n"
        "- water bottle\n"
        "- map of the northern trails\n"
        "- head torch with spare batteries\n"
        "- sandwiches for two days\n"
        "- first aid kit\n"
        "- sun cream\n"),
    "email": (
        "Hi Sam, thanks for sending the draft so quickly. I read it on the train this morning and "
        "I think the structure works well. The second section is a little long; could you cut it "
        "to about half and move the table to the appendix? Also, the numbers in the summary do "
        "not match the numbers in the table, so please check which ones are right. Otherwise it "
        "is ready to go. Best, Alex"),
    "typos": (
        "Our libary will be closed on Monday for the public holliday. Books that are due on that "
        "day can be returned on Tuesday without a fine. The reading room will reopen at nine "
        "oclock, and the childrens corner will have a story hour at eleven. We thank you for your "
        "patiance while the new catalog system is being instaled."),
}

# (text, instruction) pairs; the instruction comes before the text.
TASKS = [
    ("notes", "Summarise these meeting notes as a bulleted list of decisions and action items, "
              "keeping names and dates exactly as written."),
    ("notes", "Repeat these meeting notes exactly, but change the release date from the 21st to "
              "the 28th everywhere."),
    ("notes", "Rewrite these notes in the first person plural (we), changing nothing else."),
    ("notes", "Copy these notes, replacing every person's name with their initial."),
    ("story", "Repeat this story word for word, but change the number of steps to ninety-nine."),
    ("story", "Summarise this story in two sentences, reusing its own words."),
    ("story", "Rewrite this story in the present tense. Keep every sentence, in order."),
    ("story", "Repeat this story, replacing 'green book' with 'blue notebook' everywhere."),
    ("story", "Edit this story: split the longest sentence into two, and leave the rest unchanged. "
              "Output the whole story."),
    ("code", "Rename the variable `total` to `acc` in this code and output the whole code."),
    ("code", "Add type hints (list[float] -> float) to both functions. Output the whole code."),
    ("code", "Add a docstring to each function and output the complete code, otherwise unchanged."),
    ("code", "Rewrite `variance` to reuse a helper `squared_diff(v, m)`; output all the code."),
    ("recipe", "Scale this recipe to eight people: repeat it exactly, doubling every quantity."),
    ("recipe", "Summarise this recipe as an ingredients list followed by numbered steps, using "
               "the original wording."),
    ("recipe", "Repeat this recipe but replace basil with parsley, changing nothing else."),
    ("recipe", "Convert this recipe to a vegan one only if needed; otherwise repeat it unchanged "
               "and say it is already vegan."),
    ("config", "Change the port of the server to 9090 and the log level to debug. Output the whole "
               "file."),
    ("config", "Add a `replicas: 2` key under database, keep everything else, output the file."),
    ("config", "Convert this YAML to JSON with the same keys and values."),
    ("config", "Repeat this configuration with every number doubled."),
    ("list", "Repeat this packing list, adding 'whistle' after 'first aid kit'."),
    ("list", "Sort this packing list alphabetically. Keep each item's text unchanged."),
    ("list", "Turn this packing list into a numbered list, keeping each item exactly."),
    ("list", "Repeat the list, removing anything that is food."),
    ("email", "Rewrite this email to be more formal, keeping all of its requests."),
    ("email", "Repeat this email, but address it to Kim instead of Sam and sign it Jordan."),
    ("email", "Summarise the requests in this email as a checklist, quoting its words."),
    ("email", "Edit this email so the second section becomes a third of its length instead of "
              "half. Output the whole email."),
    ("typos", "Fix the spelling mistakes in this notice and output the whole corrected notice, "
              "changing nothing else."),
    ("typos", "Repeat this notice with the spelling fixed and the closing day changed to Friday."),
    ("typos", "Summarise this notice in one sentence, then repeat it with its typos fixed."),
    ("notes", "Translate nothing; just repeat these notes exactly, one sentence per line."),
    ("code", "Repeat this code exactly, then add a function `stddev` that uses `variance`."),
    ("list", "Repeat this list twice: first as it is, then with every item in capital letters."),
    ("story", "Repeat this story, changing the lighthouse keeper into a lighthouse keeper named "
              "Ansel, and keep everything else."),
]


def approx_tokens(text):
    # ~1.3 tokens per word for English prose, more for code and punctuation.
    return int(len(text.split()) * 1.4) + text.count("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="bench/serve_bench/data/input_grounded.jsonl")
    args = ap.parse_args()
    with open(args.out, "w") as f:
        for name, instruction in TASKS:
            text = TEXTS[name]
            out_len = max(48, min(320, approx_tokens(text) + 16))
            prompt = f"{instruction}\n\n{text}"
            f.write(json.dumps({"prompt": prompt, "output_len": out_len}) + "\n")


if __name__ == "__main__":
    main()
