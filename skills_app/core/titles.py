"""Conversation titles: made once, after the first answer, from what the user could see.

With a model: one small request (the configured cheap model) given the person's first message
and the start of the first answer, nothing hidden. Without one (the demo model, or no title
model configured): the first message itself, shortened at a word boundary. Either way the title
is one line of at most TITLE_MAX_CHARS characters.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from .llm import ModelRequest

DEFAULT_TITLE = "New conversation"
TITLE_MAX_CHARS = 60
# How much of the first message and of the first answer the title model gets.
TITLE_INPUT_CHARS = 2_000
TITLE_MAX_TOKENS = 40
TITLE_SYSTEM = (
    "You name conversations for a list of chats. Reply with a title of three to seven words "
    "that says what the user wants, in the user's language. Reply with the title only: no "
    "quotes, no punctuation at the end, no Markdown."
)


def one_line(text: str) -> str:
    """`text` on one line, whitespace collapsed."""
    return " ".join(text.split())


def shorten(text: str, limit: int = TITLE_MAX_CHARS) -> str:
    """At most `limit` characters, cut at a word boundary with an ellipsis when cut."""
    line = one_line(text)
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:-") + "…"


def title_from_message(first_message: str) -> str:
    """The title without a model: the first message, shortened (a slash command as typed)."""
    return shorten(first_message) or DEFAULT_TITLE


def command_title(names: Sequence[str], args: str) -> str:
    """A slash command's title in words: the skill's name, then the gist of its arguments.

    `/text-stats in/notes.txt` -> "Text stats: notes.txt". Built from what the person typed
    (never from the skill's hidden text); a path is named by its last part, and long arguments
    are shortened like any title.
    """
    skills = " + ".join(name.replace("-", " ").replace("_", " ").strip() for name in names)
    skills = skills[:1].upper() + skills[1:]
    gist = " ".join(_last_part(word) for word in one_line(args).split())
    return shorten(f"{skills}: {gist}" if gist else skills) or DEFAULT_TITLE


def _last_part(word: str) -> str:
    """A path's last part (`in/notes.txt` -> `notes.txt`); any other word as it is."""
    if "/" in word and "://" not in word:
        last = word.rstrip("/").rsplit("/", 1)[-1]
        return last or word
    return word


def title_request(first_message: str, answer: str, *, model: str) -> ModelRequest:
    """The request that asks the title model for a title (no tools, no thinking, no cache)."""
    prompt = (
        "The user's first message:\n<message>\n"
        + first_message[:TITLE_INPUT_CHARS]
        + "\n</message>\n\nThe start of the assistant's answer:\n<answer>\n"
        + answer[:TITLE_INPUT_CHARS]
        + "\n</answer>\n\nTitle:"
    )
    return ModelRequest(
        model=model,
        system=TITLE_SYSTEM,
        tools=[],
        messages=[{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        max_tokens=TITLE_MAX_TOKENS,
        thinking=False,
        cache=False,
    )


def clean_title(text: str) -> str:
    """The model's reply as a title: its first line, without quotes or Markdown marks; "" if none."""
    marks = "#*_`\"'“”‘’. "
    for line in text.splitlines():
        cleaned = line.strip(marks).removeprefix("Title:").strip(marks)
        if cleaned:
            return shorten(cleaned)
    return ""


def distinct_title(title: str, taken: Collection[str]) -> str:
    """`title`, or "title (2)", "title (3)", ... : the first not in `taken` (the person's other
    titles), so no two conversations in one list read the same."""
    if title not in taken:
        return title
    number = 2
    while f"{title} ({number})" in taken:
        number += 1
    return f"{title} ({number})"
