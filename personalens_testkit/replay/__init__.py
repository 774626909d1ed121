"""Record and replay of every model call of a scenario (vcrpy), one cassette per scenario and assistant."""
