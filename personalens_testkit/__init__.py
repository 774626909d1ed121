"""personalens-testkit: the PersonaLens personalization benchmark as a pytest regression suite."""

__version__ = "0.1.0"
