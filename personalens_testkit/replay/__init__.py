"""Record and replay of every model call of a scenario: one cassette per scenario and assistant (vcrpy's format)."""
