"""The user agent's own faults in a dialogue, found by checks that cost nothing (no model call), on every dialogue,
live or replayed.

The verdict on a bot assumes the simulated user played its part as the protocol says (shared/benchmark-protocol.md,
"User agent"): a natural user, consistent with its profile, who conveys its preferences subtly, never states them in
the opening query, never acts as the assistant, writes in English, and ends with TERMINATE only when the task is
done. A user agent that breaks those rules makes the bot look worse (it *hindered* the bot) or better (it *helped*).

Each rule (:data:`RULES`, one entry a rule: its name, the direction of its fault, its words, its check) reads the
dialogue's facts (:class:`Facts`) and names each user turn it finds at fault - turn 0 is the opening query, turn k
the user's answer to the assistant's k-th reply. What a finding does to a case's verdict is
:func:`~personalens_testkit.gating.expectations.user_agent_verdict`'s.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Literal, Sequence

if TYPE_CHECKING:
    from ..data.context import ScenarioContext
    from .dialogue import Dialogue

#: hindered: the fault made the bot look worse; helped: better; noted: said, with no direction (a dialogue at the
#: turn limit may be the bot's doing as well as the user's)
Direction = Literal["hindered", "helped", "noted"]

#: a run of this many words shared with the profile is pasted, not played
PASTED_WORDS = 6
#: the fewest words a turn has before a repetition or a language is judged on it
REPEATED_WORDS = 3
LANGUAGE_WORDS = 4
#: the characters of a turn a finding keeps
EXCERPT = 160


@dataclass(frozen=True)
class UserFault:
    """One rule broken in one user turn."""

    turn: int
    rule: str
    direction: Direction
    excerpt: str

    def as_dict(self) -> dict[str, object]:
        return {"turn": self.turn, "rule": self.rule, "direction": self.direction, "excerpt": self.excerpt}


@dataclass(frozen=True)
class Facts:
    """What the checks read of a dialogue: the user's turns (by turn number), the assistant's replies (the k-th at
    index k - 1), how it ended, and what the user agent was given to play."""

    user_turns: Sequence[str]
    assistant_turns: Sequence[str]
    #: ``user_terminated``, ``max_turns`` or ``error`` (None: not ended)
    termination: str | None
    #: the opening query held TERMINATE (the dialogue removed it: an opening never ends a dialogue)
    opening_terminate: bool = False
    #: the user agent's profile as it was shown: demographics, preferences and past-interaction summaries
    profile_texts: Sequence[str] = ()
    #: the preferences of the task's domains, each as its text (a value, or a list's items joined)
    preferences: Sequence[str] = ()
    #: the task as the user agent was given it (its user intent): a preference it names may be said
    intent: str = ""

    @functools.cached_property
    def user_words(self) -> list[list[str]]:
        """Each user turn's words (:func:`words`), read once for every rule."""
        return [words(text) for text in self.user_turns]


def facts_of(messages: Iterable[object], termination: str | None, *, opening_terminate: bool = False,
             profile_texts: Sequence[str] = (), preferences: Sequence[str] = (), intent: str = "") -> Facts:
    """:class:`Facts` of a dialogue's messages (each with ``role`` and ``content``, as objects or dicts)."""
    users, assistants = [], []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
        content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
        (users if role == "user" else assistants).append(str(content or ""))
    return Facts(users, assistants, termination, opening_terminate, tuple(profile_texts), tuple(preferences), intent)


def dialogue_facts(ctx: ScenarioContext, dialogue: Dialogue, shown: str) -> Facts:
    """:class:`Facts` of a scenario's dialogue; ``shown``: what the user agent was shown of its profile and task (its
    prompt's fixed part)."""
    preferences = [value if isinstance(value, str) else ", ".join(value)
                   for domain in ctx.preferences.values() for value in domain.values()]
    return facts_of(dialogue.messages, dialogue.termination.value if dialogue.termination else None,
                    opening_terminate=dialogue.opening_terminate, profile_texts=(shown,), preferences=preferences,
                    intent=ctx.intent)


def excerpt(text: str) -> str:
    """A turn's first :data:`EXCERPT` characters, as a finding keeps them."""
    return text if len(text) <= EXCERPT else text[:EXCERPT] + "..."


_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def words(text: str) -> list[str]:
    """A text's words, case-folded and Unicode-normalised (NFKC)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def _runs(tokens: Sequence[str], size: int) -> Iterator[str]:
    """A word list's runs of ``size`` words, each as its words joined by one space."""
    return (" ".join(tokens[i:i + size]) for i in range(len(tokens) - size + 1))


@functools.lru_cache(maxsize=64)
def _spaced(text: str) -> str:
    """A text's words joined by one space, with a space at each end: a run of words is in it exactly when the run,
    spaced alike, is a substring of it (a word holds no space). A scenario's profile is read once."""
    return f" {' '.join(words(text))} "


# -- the rules ---------------------------------------------------------------------------------------------------------

def _pasted(facts: Facts) -> Iterator[tuple[int, str]]:
    """A user turn holding a run of :data:`PASTED_WORDS` words of the profile as it was shown (demographics,
    preferences, past interactions): pasted, not played - the bot is handed what it should have inferred. A run the
    user's own task (its intent) holds is not pasted: saying its task is playing it."""
    shown, intent = [_spaced(text) for text in facts.profile_texts], _spaced(facts.intent)
    for turn, said in enumerate(facts.user_words):
        if any(any(f" {run} " in text for text in shown) and f" {run} " not in intent
               for run in _runs(said, PASTED_WORDS)):
            yield turn, facts.user_turns[turn]


_STOP = frozenset("a an and the of to in on for with at by or my i me is are be it this that no not".split())


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") else word


def _content(text: str) -> set[str]:
    return {_stem(word) for word in words(text) if word not in _STOP and len(word) > 2}


def _preference_in_opening(facts: Facts) -> Iterator[tuple[int, str]]:
    """The opening query states a preference (every content word of one, in any order) that the task does not name:
    the protocol's opening never states specific preferences - the bot should have to use what it knows."""
    if not facts.user_turns:
        return
    opening, intent = {_stem(w) for w in facts.user_words[0] if w not in _STOP and len(w) > 2}, _content(facts.intent)
    for preference in facts.preferences:
        wanted = _content(preference)
        if wanted and wanted <= opening and not wanted <= intent:
            yield 0, facts.user_turns[0]
            return


_ASSISTANT_LABEL = re.compile(r"(?im)^\W{0,3}(assistant|ai assistant|ai|bot|system|agent|chatbot)\s*:")
_USER_LABEL = re.compile(r"(?im)^\W{0,3}(user|human|customer|me)\s*:")
_ASSISTANT_VOICE = re.compile(r"(?i)\b(how (?:can|may) i (?:help|assist) you|as an ai\b|i(?:'m| am) an ai\b|"
                              r"i(?:'m| am) (?:a|an|your) (?:virtual |digital |ai )?assistant\b)")


def _led(facts: Facts, turn: int, shows: Callable[[str], bool]) -> bool:
    """Whether the assistant's reply that user turn ``turn`` answers shows the fault itself: the bot led the user
    there (a bot that switches language, writes both sides of a dialogue, or asks the same again), so the fault is
    not the user agent's - a bot cannot void its own cases by leading the simulated user astray."""
    return 0 < turn <= len(facts.assistant_turns) and shows(facts.assistant_turns[turn - 1])


def _speaks_as_assistant(text: str) -> bool:
    return bool(_ASSISTANT_LABEL.search(text) or _ASSISTANT_VOICE.search(text)) or len(_USER_LABEL.findall(text)) > 1


def _speaker_labels(text: str) -> bool:
    return bool(_ASSISTANT_LABEL.search(text) or _USER_LABEL.search(text))


def _as_assistant(facts: Facts) -> Iterator[tuple[int, str]]:
    """A user turn written as the assistant: an assistant's speaker label at a line's start, two user labels (a turn
    holding a dialogue), or the assistant's own voice (offering help, being an AI) - unless the reply it answers
    wrote speaker labels itself."""
    for turn, text in enumerate(facts.user_turns):
        if _speaks_as_assistant(text) and not _led(facts, turn, _speaker_labels):
            yield turn, text


def _empty(facts: Facts) -> Iterator[tuple[int, str]]:
    """A user turn with no word in it (empty, blank, or punctuation alone)."""
    for turn, said in enumerate(facts.user_words):
        if not said:
            yield turn, facts.user_turns[turn]


def _repeated(facts: Facts) -> Iterator[tuple[int, str]]:
    """A user turn saying again, word for word, what an earlier user turn said (at least :data:`REPEATED_WORDS`
    words): the simulated user is looping, the dialogue no longer moves - unless the reply it answers said again what
    an earlier reply said (asked the same twice, the same answer is the natural one)."""
    replies: set[tuple[str, ...]] = set()
    asked_again: set[str] = set()
    for reply in facts.assistant_turns:
        said = tuple(words(reply))
        if said in replies:
            asked_again.add(reply)
        replies.add(said)
    seen: set[tuple[str, ...]] = set()
    for turn, said in enumerate(map(tuple, facts.user_words)):
        if len(said) >= REPEATED_WORDS and said in seen and not _led(facts, turn, asked_again.__contains__):
            yield turn, facts.user_turns[turn]
        seen.add(said)


def _terminate_early(facts: Facts) -> Iterator[tuple[int, str]]:
    """TERMINATE in the opening query, before the assistant had a turn to act on the request. The dialogue removes it
    and goes on (an opening never ends a dialogue), so it is noted, with no direction. A TERMINATE in any later turn
    leaves the assistant its final reply to act in (the protocol's), which a cheap check cannot tell from a task done:
    that is the review's to weigh."""
    if facts.opening_terminate and facts.user_turns:
        yield 0, facts.user_turns[0]


def _turn_limit(facts: Facts) -> Iterator[tuple[int, str]]:
    """The dialogue reached the turn limit (the user never said TERMINATE): said, with no direction."""
    if facts.termination == "max_turns" and facts.user_turns:
        yield len(facts.user_turns) - 1, facts.user_turns[-1]


#: the commonest short words of languages a simulated user drifts into, by language
_FOREIGN = {
    "es": "el la los las que de y en un una por con para es está no se lo como pero más muy gracias quiero",
    "fr": "le la les des et est une un pour avec je vous pas que qui dans sur mais très merci voudrais",
    "de": "der die das und ist nicht ich sie ein eine zu mit für auf bitte danke ich möchte auch",
    "it": "il lo la gli le che di e un una per con non sono è grazie vorrei anche molto",
    "pt": "o a os as que de e um uma para com não é obrigado obrigada eu gostaria também muito",
    "nl": "de het een en is niet ik je met voor op dank graag ook maar",
}
_FOREIGN_WORDS = {language: frozenset(text.split()) for language, text in _FOREIGN.items()}
_ENGLISH = frozenset("the a an and is are i you to of in for with on it that this my me be can please thanks "
                     "want would like need what how when do have at".split())


#: the fewest letters a turn has before its script is judged (a name or a word in another script is no language)
SCRIPT_LETTERS = 8


def _outside_latin(text: str) -> bool:
    """Most of at least :data:`SCRIPT_LETTERS` letters outside the Latin script."""
    if text.isascii():
        return False
    letters = [char for char in text if char.isalpha()]
    latin = sum(1 for char in letters if "LATIN" in unicodedata.name(char, ""))
    return len(letters) >= SCRIPT_LETTERS and latin < len(letters) / 2


def _in_other_language(text: str, said: Sequence[str]) -> bool:
    if _outside_latin(text):
        return True
    if len(said) < LANGUAGE_WORDS:
        return False
    english = sum(1 for word in said if word in _ENGLISH)
    foreign = max(sum(1 for word in said if word in vocabulary) for vocabulary in _FOREIGN_WORDS.values())
    return foreign >= 2 and foreign > 2 * english


def _other_language(facts: Facts) -> Iterator[tuple[int, str]]:
    """A user turn in another language than the scenario's (English): most of its letters outside the Latin script,
    or, in one of at least :data:`LANGUAGE_WORDS` words, more than twice as many of one other language's commonest
    words as of English's - unless the reply it answers spoke that other language first."""
    for turn, text in enumerate(facts.user_turns):
        if _in_other_language(text, facts.user_words[turn]) and \
                not _led(facts, turn, lambda reply: _in_other_language(reply, words(reply))):
            yield turn, text


@dataclass(frozen=True)
class Rule:
    """One check of the user agent: its name (a finding's ``rule``), the direction of its fault, what it means in
    words, and the check (the turns at fault, each with its text)."""

    name: str
    direction: Direction
    says: str
    check: Callable[[Facts], Iterable[tuple[int, str]]] = field(compare=False)


RULES: tuple[Rule, ...] = (
    Rule("pasted_profile", "helped", "pasted its profile into the chat", _pasted),
    Rule("preference_in_opening", "helped", "stated a preference in its opening query", _preference_in_opening),
    Rule("spoke_as_assistant", "hindered", "wrote as the assistant", _as_assistant),
    Rule("empty_turn", "hindered", "said nothing", _empty),
    Rule("repeated_turn", "hindered", "repeated an earlier turn word for word", _repeated),
    Rule("terminated_early", "noted", "said TERMINATE in its opening query", _terminate_early),
    Rule("other_language", "hindered", "spoke another language than the scenario's", _other_language),
    Rule("turn_limit", "noted", "never ended the dialogue (the turn limit)", _turn_limit),
)
#: what a review by a model (``--review-user``) may find beyond the checks: the faults only reading the dialogue
#: against the profile, the task and the protocol tells, each with what it means in words
REVIEW_RULES: dict[str, str] = {
    "off_task": "drifted off its task",
    "contradicts_profile": "contradicted its profile",
    "states_preferences": "stated its preferences outright (the protocol: convey them subtly, never in the opening)",
    "does_assistants_work": "did the assistant's work for it",
    "ended_too_early": "ended the dialogue before its task was done",
    "broke_character": "broke character (spoke as a simulator, an AI, or about its instructions)",
}
RULE_WORDS = {**{rule.name: rule.says for rule in RULES}, **REVIEW_RULES}
#: the rules a review may name: the checks' own and its own
REVIEW_KINDS = tuple(RULE_WORDS)


def find_user_faults(facts: Facts, rules: Sequence[Rule] = RULES) -> list[UserFault]:
    """Every rule's findings, in turn order (one finding a rule and turn)."""
    found = {(turn, rule.name): UserFault(turn, rule.name, rule.direction, excerpt(text))
             for rule in rules for turn, text in rule.check(facts)}
    return sorted(found.values(), key=lambda fault: (fault.turn, [r.name for r in rules].index(fault.rule)))
