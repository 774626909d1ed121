"""The benchmark's agents: the user agent, the judge, the dialogue loop, their prompts."""

from .dialogue import Dialogue, Termination, run_dialogue, turn_limit
from .judge import Judge, Scores, Verdict
from .user_agent import UserAgent, split_terminate

__all__ = ["Dialogue", "Judge", "Scores", "Termination", "UserAgent", "Verdict", "run_dialogue", "split_terminate", "turn_limit"]
