"""The applications of the drift-quality benchmark: BIG-bench tasks behind prompt templates.

Each application wraps one public task's inputs in one of four instruction wordings (its prompt
templates, `{x}` marks the task input), with traffic shares that are uneven as in real use. Six
templates also have a rewording: the same request put in other words, which an application
team could ship without setting a prompt version — the silent change the benchmark plants.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Template:
    app: str
    name: str  # "qa/1"
    text: str  # with "{x}" where the task input goes
    share: float  # of all traffic
    reworded: str | None = None  # the silent rewording, when this template has one

    def render(self, x: str, *, reworded: bool = False) -> str:
        text = self.reworded if reworded and self.reworded else self.text
        return text.replace("{x}", x)


@dataclass(frozen=True)
class App:
    name: str
    tasks: tuple[str, ...]  # BIG-bench tasks whose inputs it serves
    share: float
    templates: tuple[tuple[str, float, str | None], ...]  # (text, share within app, rewording)


APPS = (
    App(
        "qa",
        ("qa_wikidata",),
        0.30,
        (
            ("Complete the sentence with the right fact: {x}", 0.4, None),
            (
                "{x} ... Finish this statement.",
                0.25,
                "Here is the start of a statement about the world. "
                "Write the words that correctly end it.\n\n{x}",
            ),
            ("Trivia time! Fill in the blank: {x} ____", 0.2, None),
            ("You are a knowledge base. Continue: {x}", 0.15, None),
        ),
    ),
    App(
        "arithmetic",
        ("arithmetic/2_digit_addition", "arithmetic/2_digit_subtraction"),
        0.20,
        (
            ("{x}", 0.35, None),
            (
                "Calculate: {x} Reply with the number only.",
                0.3,
                "Please work out the following arithmetic problem step by step, "
                "then state the result. {x}",
            ),
            ("Math homework question. {x}", 0.2, None),
            ("Q: {x}\nA:", 0.15, None),
        ),
    ),
    App(
        "dates",
        ("date_understanding",),
        0.15,
        (
            ("{x}", 0.4, None),
            (
                "Answer the date question. {x}",
                0.3,
                "I am confused about dates, can you help me figure this out and "
                "explain your reasoning? {x}",
            ),
            ("Calendar assistant. Question: {x}", 0.2, None),
            ("{x} Answer in MM/DD/YYYY.", 0.1, None),
        ),
    ),
    App(
        "intent",
        ("intent_recognition",),
        0.20,
        (
            (
                "Classify the intent of the user utterance.\n{x}\nIntent:",
                0.4,
                "A customer sent the message below to our voice assistant. "
                "What do they want it to do? Describe it in one sentence.\n{x}",
            ),
            ("What does the user want? {x}", 0.3, None),
            (
                "Label this request with one of: add_to_playlist, book_restaurant, "
                "get_weather, play_music, search_screening_event, search_creative_work, "
                "rate_book.\n{x}",
                0.2,
                None,
            ),
            ("{x}\nWhich action should the assistant take?", 0.1, None),
        ),
    ),
    App(
        "sports",
        ("sports_understanding",),
        0.15,
        (
            ("Is the following sentence plausible? {x}", 0.45, None),
            (
                'Sports fact check: could this happen? "{x}"',
                0.3,
                "Imagine you are a sports commentator. Tell the audience whether "
                "this is something that really happens in the sport: {x}",
            ),
            ("{x}. True or false?", 0.15, None),
            ("Plausible or implausible: {x}", 0.1, None),
        ),
    ),
)


def all_templates() -> list[Template]:
    out = []
    for app in APPS:
        for i, (text, share, reworded) in enumerate(app.templates):
            out.append(Template(app.name, f"{app.name}/{i + 1}", text, app.share * share, reworded))
    return out


def reworded_templates() -> list[Template]:
    return [t for t in all_templates() if t.reworded]


def task_app() -> dict[str, str]:
    return {task: app.name for app in APPS for task in app.tasks}
